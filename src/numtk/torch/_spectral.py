"""Spectral representation alignment for diffusion training, beside REPA's projection loss.

Five pieces, each usable on its own model:

- the spectral contrastive loss of HaoChen et al. (2021) in the batch form of the authors' code, with its
  norm clipping at ``sqrt(mu)`` and division by ``mu``, and its population form on a finite augmentation graph
  (exact: ``||A_bar - U U^T||_F^2 - ||A_bar||_F^2``, or from the expectations that define it);
- REPA's projection loss (negative cosine per token, averaged) and its three-layer SiLU projector;
- the linear interpolant of REPA/SiT (``x_t = (1 - t) x0 + t eps``, velocity target ``eps - x0``; t = 1 is noise);
- the spectral alignment regulariser (reconstructed): the spectral loss between projected hidden states of one
  clean sample noised twice, or against a frozen encoder's features ("spectral REPA");
- :func:`diffusion_loss`, the denoising loss with any of these alignment terms added, for a model that returns
  ``(prediction, hidden)``.
"""

from __future__ import annotations

import math
from typing import Any, Callable

from numtk._lib import Result
from numtk._lib._constraints import constraints
from numtk._lib._validation import check_bool, check_int, check_option, check_real, check_size
from numtk.torch._common import check_callable as _check_callable
from numtk.torch._common import check_like
from numtk.torch._common import check_reduction, check_tensor, reduce_loss, torch, torch_generator

__all__ = ["spectral_contrastive_loss", "spectral_population_loss", "repa_loss", "build_projector",
           "linear_interpolant", "spectral_alignment_loss", "diffusion_loss"]

_REGULARIZERS = (None, "spectral", "spectral_repa", "repa")
_TOKENS = ("flatten", "mean")
_FORMS = ("matrix", "expectation")
#: the largest width build_projector accepts for one layer, and for its parameters in total
_MAX_WIDTH = 2**20
_MAX_PARAMETERS = 2**32


# --------------------------------------------------------------------------------------------------
# argument helpers
# --------------------------------------------------------------------------------------------------
def _check_mu(mu: Any, dtype: "torch.dtype") -> float:
    """``mu > 0`` finite, and ``mu``, ``sqrt(mu)`` representable as normal numbers of ``dtype``."""
    mu = check_real(mu, "mu", low=0.0, low_open=True)
    info = torch.finfo(dtype)
    if not info.tiny <= mu <= info.max:
        raise ValueError(f"`mu` must lie in [{info.tiny:g}, {info.max:g}] for {dtype} embeddings (the loss is "
                         f"divided by mu); got {mu!r}")
    return mu


def _times(t: Any, name: str, like: "torch.Tensor") -> "torch.Tensor":
    """``t`` (a float in [0, 1], or a tensor of shape () or (B,) with values in [0, 1]) as a (B,) tensor of
    ``like``'s dtype and device, B = ``like.shape[0]``."""
    B = like.shape[0]
    if isinstance(t, torch.Tensor):
        check_tensor(t, name)
        if t.device != like.device:
            raise ValueError(f"`{name}` must be on the device of the data, {like.device}; got {t.device}")
        if t.ndim > 1 or (t.ndim == 1 and t.shape[0] != B):
            raise ValueError(f"`{name}` must be a float, a 0-D tensor or a tensor of shape ({B},) (one time per "
                             f"item); got shape {tuple(t.shape)}")
        if t.numel() and not bool(((t >= 0) & (t <= 1)).all()):
            raise ValueError(f"`{name}` must lie in [0, 1] (t = 0 is data, t = 1 is noise)")
        return t.to(dtype=like.dtype).expand(B) if t.ndim == 0 else t.to(dtype=like.dtype)
    if isinstance(t, (bool,)) or not hasattr(t, "__float__") or isinstance(t, (str, bytes)):
        raise TypeError(f"`{name}` must be a float in [0, 1] or a tensor of times; got {type(t).__name__}")
    value = check_real(t, name, low=0.0, high=1.0)
    return torch.full((B,), value, dtype=like.dtype, device=like.device)


def _is_uniform(t2: Any) -> bool:
    """``t2 == 'uniform'``; another string is an error naming ``t2``."""
    if isinstance(t2, str):
        check_option(t2, "t2", ("uniform",))
        return True
    return False


def _expand_time(t: "torch.Tensor", x: "torch.Tensor") -> "torch.Tensor":
    """(B,) times broadcast over the trailing dimensions of ``x``."""
    return t.reshape(t.shape + (1,) * (x.ndim - 1))


def _clip_norms(z: "torch.Tensor", radius: float) -> "torch.Tensor":
    """Rows of norm >= radius scaled onto the sphere of that radius, the others unchanged (the anchor's
    mask-and-normalise, written as one scale factor: rows inside keep the factor 1 exactly)."""
    norms = torch.linalg.vector_norm(z, dim=-1, keepdim=True)
    return z * (radius / norms.clamp_min(radius))


def _gaussian_noise(like: "torch.Tensor", gen: "torch.Generator") -> "torch.Tensor":
    return torch.randn(like.shape, generator=gen, dtype=like.dtype, device=like.device)


# --------------------------------------------------------------------------------------------------
# the spectral contrastive loss
# --------------------------------------------------------------------------------------------------
def _spectral_terms(z1: "torch.Tensor", z2: "torch.Tensor", mu: float, clip: bool,
                    name: str = "z1") -> "torch.Tensor":
    """Per-anchor terms (B,) of the batch spectral loss; the arguments are checked.

    The B x B Gram matrix is the one quadratic temporary (with its square, and their gradients): sizes whose
    Gram would not fit are refused with a ValueError naming ``name``. The off-diagonal sum of a row is the
    row's sum less its diagonal entry, so no mask is built.
    """
    B = z1.shape[0]
    check_size(B, 4.0 * B * z1.element_size(), name)
    if clip:
        radius = math.sqrt(mu)
        z1, z2 = _clip_norms(z1, radius), _clip_norms(z2, radius)
    positive = (z1 * z2).sum(dim=1)
    off = (z1 @ z2.T).square().sum(dim=1) - positive.square()
    return (-2.0 * positive + off / (B - 1)) / mu


def _generator(rng: Any, x0: "torch.Tensor") -> "torch.Generator":
    """``rng`` as a generator on x0's device; a torch.Generator on another device is refused."""
    gen = torch_generator(rng, device=x0.device)
    gd, xd = torch.device(gen.device), x0.device
    if gd.type != xd.type or (gd.index is not None and xd.index is not None and gd.index != xd.index):
        raise ValueError(f"`rng` is a torch.Generator on {gd}, but `x0` is on {xd}: pass a generator on "
                         "x0's device (or an int seed)")
    return gen


@constraints(z1="tensor", z2="tensor", mu="real>0", clip="bool", reduction="option")
def spectral_contrastive_loss(z1: "torch.Tensor", z2: "torch.Tensor", mu: float = 1.0, *, clip: bool = True,
                              reduction: str = "mean") -> "torch.Tensor":
    r"""The spectral contrastive loss of a batch of positive pairs (HaoChen et al., 2021).

    .. math::

        L = \frac{1}{\mu}\Big(-\frac{2}{B}\sum_i z_{1,i}^\top z_{2,i}
            + \frac{1}{B(B-1)}\sum_{i \ne j} (z_{1,i}^\top z_{2,j})^2\Big),

    where row i of ``z1`` and row i of ``z2`` embed two augmentations of one sample (a positive pair) and the
    other rows of ``z2`` serve as its negatives. It is the batch estimate of the population loss
    :math:`-2\,E[f(x)^\top f(x^+)] + E[(f(x)^\top f(x'))^2]` of :func:`spectral_population_loss`.

    Parameters
    ----------
    z1, z2 : torch.Tensor, shape (B, k)
        Embeddings of the two views, B >= 2 (the second term needs a negative), same dtype and device.
    mu : float, default 1.0
        The anchor's scale: with ``clip``, rows of norm >= sqrt(mu) are scaled to norm sqrt(mu); the loss is
        divided by mu.
    clip : bool, default True
        Clip the norms at sqrt(mu) as the authors' code always does. The loss is not scale invariant (its
        second term grows as the fourth power of the norms), so without clipping the embeddings need another
        normalisation.
    reduction : {'mean', 'sum', 'none'}, default 'mean'
        ``'none'`` returns the B per-anchor terms
        :math:`(-2 z_{1,i}^\top z_{2,i} + \frac{1}{B-1}\sum_{j \ne i}(z_{1,i}^\top z_{2,j})^2)/\mu`, whose mean
        is the loss; ``'sum'`` their sum.

    Returns
    -------
    torch.Tensor
        The loss (0-D), or the per-anchor terms (B,) for ``reduction='none'``; differentiable in both inputs.

    Notes
    -----
    Matches ``D(z1, z2, mu)`` of ``models/spectral.py`` in jhaochenz96/spectral_contrastive_learning: the
    anchor keeps rows of norm < sqrt(mu) and replaces the others by ``normalize(z) * sqrt(mu)``; here the same
    map is one factor ``sqrt(mu) / max(|z|, sqrt(mu))`` per row (exactly 1 inside the ball; the gradient is
    the same, and no 0/0 arises at a zero row). Its first part ``-2 mean(z1 * z2) * k`` is
    :math:`-\frac{2}{B}\sum_i z_{1,i}^\top z_{2,i}`; its second averages the squared off-diagonal entries of
    :math:`z_1 z_2^\top` over the B(B - 1) pairs i != j (the diagonal, the positive pairs, is excluded); the
    sum is divided by mu. ``clip=False`` with mu = 1 is the plain batch form of the paper.

    References
    ----------
    .. [1] J. Z. HaoChen, C. Wei, A. Gaidon, T. Ma, "Provable guarantees for self-supervised deep learning with
           spectral contrastive loss", NeurIPS 2021.

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.spectral import spectral_contrastive_loss
    >>> z1 = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    >>> spectral_contrastive_loss(z1, z1)          # -2 * 1 + 0: orthonormal positives, orthogonal negatives
    tensor(-2.)
    >>> z2 = torch.tensor([[0.6, 0.8], [0.8, 0.6]])
    >>> spectral_contrastive_loss(z1, z2, reduction="none")
    tensor([-0.5600, -0.5600])
    """
    check_tensor(z1, "z1", ndim=2)
    check_tensor(z2, "z2", ndim=2)
    check_like(z2, z1, "z2", "z1")
    if z1.shape[0] < 2:
        raise ValueError(f"`z1` and `z2` need a batch of at least 2 rows (negatives are the other rows); got "
                         f"{z1.shape[0]}")
    if z1.shape[1] < 1:
        raise ValueError("`z1` and `z2` need at least one column (embedding dimension)")
    mu = _check_mu(mu, z1.dtype)
    clip = check_bool(clip, "clip")
    check_reduction(reduction)
    return reduce_loss(_spectral_terms(z1, z2, mu, clip), reduction)


@constraints(F="tensor", W="tensor", form="option")
def spectral_population_loss(F: "torch.Tensor", W: "torch.Tensor", *, form: str = "matrix") -> "torch.Tensor":
    r"""The exact population spectral contrastive loss of an embedding on a finite augmentation graph.

    The graph has nodes x = 0..n-1 (the augmented data) and symmetric non-negative weights :math:`w_{xx'}`,
    normalised here to sum 1: :math:`w_{xx'}` is the probability that (x, x') is a positive pair, and
    :math:`w_x = \sum_{x'} w_{xx'}` the probability of x. With :math:`f(x)` the x-th row of ``F``,

    .. math::

        L(f) = -2\,E_{(x, x^+) \sim w}[f(x)^\top f(x^+)] + E_{x, x' \sim w_\cdot}[(f(x)^\top f(x'))^2]
             = \|\bar A - U U^\top\|_F^2 - \|\bar A\|_F^2,

    where :math:`\bar A = D^{-1/2} W D^{-1/2}` is the normalised adjacency and :math:`U_x = \sqrt{w_x}\,f(x)`.
    The minimisers over k-dimensional f therefore give :math:`U U^\top` = the best rank-k positive
    semi-definite approximation of :math:`\bar A` (Eckart-Young): its top-k eigenpairs.

    Parameters
    ----------
    F : torch.Tensor, shape (n, k)
        The embedding of every node.
    W : torch.Tensor, shape (n, n)
        Symmetric, non-negative weights, every node of positive degree (any positive total: normalised).
        Same dtype and device as ``F``.
    form : {'matrix', 'expectation'}, default 'matrix'
        ``'matrix'``: :math:`\|\bar A - UU^\top\|_F^2 - \|\bar A\|_F^2`; ``'expectation'``: the two expectations
        of the definition, summed over the graph's pairs (no :math:`\bar A`). The two agree to rounding; the
        tests hold them to 1e-12 in float64.

    Returns
    -------
    torch.Tensor
        The loss (0-D, differentiable in ``F``), in the dtype of the inputs; use float64 for exactness.

    References
    ----------
    .. [1] J. Z. HaoChen, C. Wei, A. Gaidon, T. Ma, "Provable guarantees for self-supervised deep learning with
           spectral contrastive loss", NeurIPS 2021 (Lemma 3.2).

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.spectral import spectral_population_loss
    >>> W = torch.tensor([[2.0, 1.0], [1.0, 2.0]], dtype=torch.float64)
    >>> F = torch.ones(2, 1, dtype=torch.float64)     # U = sqrt(w) F: the top eigenvector of A_bar
    >>> round(float(spectral_population_loss(F, W)), 12)      # -(its eigenvalue 1)^2
    -1.0
    >>> round(float(spectral_population_loss(F, W, form="expectation")), 12)
    -1.0
    """
    check_tensor(F, "F", ndim=2)
    check_tensor(W, "W", ndim=2)
    form = check_option(form, "form", _FORMS)
    n = F.shape[0]
    if n < 1 or F.shape[1] < 1:
        raise ValueError(f"`F` must have at least one row (node) and one column; got shape {tuple(F.shape)}")
    if W.shape != (n, n):
        raise ValueError(f"`W` must have shape ({n}, {n}) (one row and column per row of `F`); got "
                         f"{tuple(W.shape)}")
    if W.dtype != F.dtype:
        raise TypeError(f"`W` must have the dtype of `F`, {F.dtype}; got {W.dtype}")
    if W.device != F.device:
        raise ValueError(f"`W` must be on the device of `F`, {F.device}; got {W.device}")
    Wd = W.detach()
    if bool((Wd < 0).any()):
        raise ValueError("`W` must be non-negative (weights of positive pairs)")
    scale = float(Wd.abs().max())
    if float((Wd - Wd.T).abs().max()) > 8 * torch.finfo(W.dtype).eps * scale:
        raise ValueError("`W` must be symmetric (an undirected augmentation graph)")
    total = W.sum()
    degree = W.sum(dim=1)
    if not bool((degree > 0).all()) or not bool(torch.isfinite(total)):
        raise ValueError("`W` must give every node a positive degree (a node without positive pairs has no "
                         "normalised adjacency), with a finite total")
    Wn = W / total
    w = degree / total
    if form == "matrix":
        root = torch.sqrt(w)
        A = Wn / (root[:, None] * root[None, :])
        U = root[:, None] * F
        return ((A - U @ U.T) ** 2).sum() - (A ** 2).sum()
    G = F @ F.T
    return -2.0 * (Wn * G).sum() + (w[:, None] * w[None, :] * G ** 2).sum()


# --------------------------------------------------------------------------------------------------
# REPA
# --------------------------------------------------------------------------------------------------
def _check_module_input(module: Any, t: "torch.Tensor", name_module: str, name_tensor: str) -> None:
    """An nn.Module's first parameter has the dtype and device of the tensor it is given (else a clear error
    instead of torch's matmul message)."""
    if not isinstance(module, torch.nn.Module):
        return
    param = next(module.parameters(), None)
    if param is None:
        return
    if param.dtype != t.dtype:
        raise TypeError(f"`{name_tensor}` has dtype {t.dtype} but `{name_module}` has {param.dtype} parameters; "
                        f"convert one (e.g. {name_module}.to({t.dtype}))")
    if param.device != t.device:
        raise ValueError(f"`{name_tensor}` is on {t.device} but `{name_module}` has parameters on {param.device}")


def _project(projector: Any, h: "torch.Tensor", name: str = "projector", name_h: str = "h") -> "torch.Tensor":
    if projector is None:
        return h
    _check_module_input(projector, h, name, name_h)
    z = projector(h)
    if not isinstance(z, torch.Tensor):
        raise TypeError(f"`{name}` must return a torch.Tensor; got {type(z).__name__}")
    if z.shape[:-1] != h.shape[:-1]:
        raise ValueError(f"`{name}` must map (..., D) to (..., k), keeping the leading dimensions "
                         f"{tuple(h.shape[:-1])}; got {tuple(z.shape)}")
    return z


@constraints(h="tensor", z_target="tensor", projector="callable", reduction="option")
def repa_loss(h: "torch.Tensor", z_target: "torch.Tensor", projector: Callable | None = None, *,
              reduction: str = "mean") -> "torch.Tensor":
    r"""REPA's projection loss: the negative cosine between projected hidden states and target features.

    .. math:: L = -\frac{1}{BN}\sum_{b, n} \cos\big(h_\phi(h_{b,n}),\ y_{b,n}\big),

    one cosine per token (per item when there are no tokens), averaged: the convention of REPA's ``SILoss``
    (Yu et al., 2025), whose target :math:`y` is a frozen encoder's (DINOv2's) patch features of the clean
    image and :math:`h_\phi` a small MLP (:func:`build_projector`) on the diffusion transformer's hidden state.

    Parameters
    ----------
    h : torch.Tensor, shape (B, ..., D)
        Hidden states: (B, D) for one vector per item, (B, N, D) for N tokens.
    z_target : torch.Tensor, shape (B, ..., k)
        Target features, with the leading dimensions of ``h`` (and, without a projector, D = k), same dtype and
        device. Compute them under ``torch.no_grad()`` for a frozen encoder: the loss differentiates through
        whatever requires a gradient.
    projector : callable, optional
        Maps (..., D) to (..., k) (an ``nn.Module``); None compares ``h`` itself.
    reduction : {'mean', 'sum', 'none'}, default 'mean'
        ``'none'``: the negative cosines, shape ``h.shape[:-1]``.

    Returns
    -------
    torch.Tensor
        In [-1, 1]: -1 when every token points the way of its target, 0 when orthogonal. Invariant to positive
        rescaling of either argument (zero vectors count as orthogonal, as ``F.normalize`` makes them).

    References
    ----------
    .. [1] S. Yu, S. Kwak, H. Jang, J. Jeong, J. Huang, J. Shin, S. Xie, "Representation alignment for
           generation: training diffusion transformers is easier than you think", ICLR 2025.

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.spectral import repa_loss
    >>> h = torch.tensor([[[1.0, 0.0], [0.0, 2.0]]])            # one item, two tokens
    >>> repa_loss(h, torch.tensor([[[3.0, 0.0], [1.0, 0.0]]]), reduction="none")
    tensor([[-1., -0.]])
    >>> repa_loss(h, torch.tensor([[[3.0, 0.0], [1.0, 0.0]]]))
    tensor(-0.5000)
    """
    check_tensor(h, "h")
    check_tensor(z_target, "z_target")
    projector = _check_callable(projector, "projector", optional=True)
    check_reduction(reduction)
    if h.ndim < 2:
        raise ValueError(f"`h` must have shape (B, ..., D); got {h.ndim}-D")
    if z_target.shape[:-1] != h.shape[:-1]:
        raise ValueError(f"`z_target` must have the leading dimensions of `h`, {tuple(h.shape[:-1])}; got shape "
                         f"{tuple(z_target.shape)}")
    if z_target.device != h.device:
        raise ValueError(f"`z_target` must be on the device of `h`, {h.device}; got {z_target.device}")
    z = _project(projector, h)
    if z.shape[-1] != z_target.shape[-1]:
        what = "the projector's output" if projector is not None else "`h`"
        raise ValueError(f"`z_target` must have the feature dimension of {what}, {z.shape[-1]}; got "
                         f"{z_target.shape[-1]}")
    cos = (torch.nn.functional.normalize(z, dim=-1)
           * torch.nn.functional.normalize(z_target.to(z.dtype), dim=-1)).sum(dim=-1)
    return reduce_loss(-cos, reduction)


@constraints(in_dim="count", out_dim="count", hidden="count", rng="rng")
def build_projector(in_dim: int, out_dim: int, hidden: int = 2048, *, rng: Any = None) -> "torch.nn.Sequential":
    """REPA's projector: Linear(in_dim, hidden) - SiLU - Linear(hidden, hidden) - SiLU - Linear(hidden, out_dim).

    Parameters
    ----------
    in_dim : int
        Width of the hidden states it reads (the diffusion model's).
    out_dim : int
        Width of the target (the frozen encoder's feature dimension, 768 for DINOv2-B in REPA; the embedding
        dimension k of the spectral loss).
    hidden : int, default 2048
        The width of its two hidden layers (REPA's ``projector_dim``).
    rng : None, int, numpy.random.Generator or torch.Generator
        Draws the initial weights (PyTorch's default initialisation of ``nn.Linear``: Kaiming-uniform weights
        with a = sqrt(5), biases uniform on +-1/sqrt(fan_in)), without touching torch's global random state.

    Returns
    -------
    torch.nn.Sequential
        The projector, float32 on the CPU (move it with ``.to(...)``).

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.spectral import build_projector
    >>> proj = build_projector(16, 8, hidden=32, rng=0)
    >>> proj
    Sequential(
      (0): Linear(in_features=16, out_features=32, bias=True)
      (1): SiLU()
      (2): Linear(in_features=32, out_features=32, bias=True)
      (3): SiLU()
      (4): Linear(in_features=32, out_features=8, bias=True)
    )
    >>> proj(torch.zeros(5, 16)).shape
    torch.Size([5, 8])
    >>> bool((build_projector(16, 8, hidden=32, rng=0)[0].weight == proj[0].weight).all())
    True
    """
    in_dim = check_int(in_dim, "in_dim", minimum=1, maximum=_MAX_WIDTH)
    out_dim = check_int(out_dim, "out_dim", minimum=1, maximum=_MAX_WIDTH)
    hidden = check_int(hidden, "hidden", minimum=1, maximum=_MAX_WIDTH)
    n_params = (in_dim + 1) * hidden + (hidden + 1) * hidden + (hidden + 1) * out_dim
    if n_params > _MAX_PARAMETERS:
        raise ValueError(f"`in_dim`, `hidden` and `out_dim` give {n_params} parameters, more than "
                         f"{_MAX_PARAMETERS}")
    gen = torch_generator(rng)
    layers = []
    for fan_in, fan_out in ((in_dim, hidden), (hidden, hidden), (hidden, out_dim)):
        lin = torch.nn.utils.skip_init(torch.nn.Linear, fan_in, fan_out)
        with torch.no_grad():
            torch.nn.init.kaiming_uniform_(lin.weight, a=math.sqrt(5.0), generator=gen)
            bound = 1.0 / math.sqrt(fan_in)
            lin.bias.uniform_(-bound, bound, generator=gen)
        layers += [lin, torch.nn.SiLU()]
    return torch.nn.Sequential(*layers[:-1])


# --------------------------------------------------------------------------------------------------
# the interpolant and the alignment regulariser
# --------------------------------------------------------------------------------------------------
@constraints(x0="tensor", noise="tensor", t=("prob", "tensor"))
def linear_interpolant(x0: "torch.Tensor", noise: "torch.Tensor", t: Any) -> tuple:
    r"""The linear path of REPA and SiT: :math:`x_t = (1 - t)\,x_0 + t\,\varepsilon`, velocity target
    :math:`\varepsilon - x_0`.

    t = 0 is the data and t = 1 pure noise (REPA's convention, the reverse of the flow-matching papers that
    put data at t = 1). The target is :math:`dx_t/dt`, what a v-prediction model regresses; sampling integrates
    :math:`dx/dt = v(x, t)` from t = 1 down to 0.

    Parameters
    ----------
    x0 : torch.Tensor, shape (B, ...)
        Clean data.
    noise : torch.Tensor
        :math:`\varepsilon`, the shape, dtype and device of ``x0``.
    t : float or torch.Tensor
        In [0, 1]: one time for all, or a tensor of shape () or (B,) (one per item, broadcast over the other
        dimensions); cast to the dtype of ``x0``.

    Returns
    -------
    x_t : torch.Tensor
        The noised data, the shape of ``x0``.
    target : torch.Tensor
        The velocity :math:`\varepsilon - x_0`.

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.spectral import linear_interpolant
    >>> x0, eps = torch.tensor([[2.0, 0.0]]), torch.tensor([[0.0, 1.0]])
    >>> linear_interpolant(x0, eps, 0.25)
    (tensor([[1.5000, 0.2500]]), tensor([[-2.,  1.]]))
    >>> linear_interpolant(x0, eps, torch.tensor([1.0]))[0]           # t = 1 is the noise
    tensor([[0., 1.]])
    """
    check_tensor(x0, "x0")
    check_tensor(noise, "noise")
    if x0.ndim < 1:
        raise ValueError("`x0` must have a batch dimension, shape (B, ...); got a 0-D tensor")
    check_like(noise, x0, "noise", "x0")
    tt = _expand_time(_times(t, "t", x0), x0)
    return (1.0 - tt) * x0 + tt * noise, noise - x0


def _hidden(fn: Any, x: "torch.Tensor", t: "torch.Tensor", name: str) -> "torch.Tensor":
    h = fn(x, t)
    if not isinstance(h, torch.Tensor):
        raise TypeError(f"`{name}` must return a torch.Tensor of hidden states; got {type(h).__name__} (a model "
                        f"returning (prediction, hidden) goes to diffusion_loss, or wrap it: "
                        f"lambda x, t: model(x, t)[1])")
    if h.ndim < 2 or h.shape[0] != x.shape[0]:
        raise ValueError(f"`{name}` must return hidden states of shape (B, ..., D) with B = {x.shape[0]}; got "
                         f"{tuple(h.shape)}")
    return h


def _target_features(target: Any, x0: "torch.Tensor") -> "torch.Tensor":
    if isinstance(target, torch.Tensor):
        check_tensor(target, "target")
        if target.device != x0.device:
            raise ValueError(f"`target` must be on the device of `x0`, {x0.device}; got {target.device}")
        return target.detach()
    _check_callable(target, "target")
    with torch.no_grad():
        y = target(x0)
    if not isinstance(y, torch.Tensor):
        raise TypeError(f"`target` must return a torch.Tensor of features; got {type(y).__name__}")
    check_tensor(y, "target(x0)")
    return y


def _token_rows(z: "torch.Tensor", tokens: str) -> "torch.Tensor":
    """(B, ..., k) -> (rows, k): every token a sample ('flatten') or one mean per item ('mean')."""
    if z.ndim == 2:
        return z
    if tokens == "mean":
        return z.reshape(z.shape[0], -1, z.shape[-1]).mean(dim=1)
    return z.reshape(-1, z.shape[-1])


def _spectral_pair(z1: "torch.Tensor", z2: "torch.Tensor", *, mu: float, clip: bool, tokens: str,
                   reduction: str, name2: str) -> "torch.Tensor":
    """The spectral loss between projected views (B, ..., k); per-anchor terms shaped like the rows."""
    if z2.shape != z1.shape:
        raise ValueError(f"`{name2}` must have the shape of the projected hidden states, {tuple(z1.shape)}; got "
                         f"{tuple(z2.shape)}")
    r1, r2 = _token_rows(z1, tokens), _token_rows(z2.to(z1.dtype), tokens)
    if r1.shape[0] < 2:
        raise ValueError(f"the spectral loss needs at least 2 samples (batch items or tokens); got {r1.shape[0]}")
    terms = _spectral_terms(r1, r2, _check_mu(mu, z1.dtype), clip,
                            "tokens" if z1.ndim > 2 and tokens == "flatten" else "x0")
    if reduction == "none" and z1.ndim > 2 and tokens == "flatten":
        terms = terms.reshape(z1.shape[:-1])
    return reduce_loss(terms, reduction)


@constraints(hidden_fn="callable", x0="tensor", t1=("prob", "tensor"), t2=("prob", "tensor", "option"),
             projector="callable", target=("tensor", "callable"), mu="real>0", clip="bool", same_noise="bool",
             tokens="option", reduction="option", rng="rng")
def spectral_alignment_loss(hidden_fn: Callable, x0: "torch.Tensor", *, t1: Any, t2: Any = None,
                            projector: Callable | None, target: Any = None, mu: float = 1.0, clip: bool = True,
                            same_noise: bool = False, tokens: str = "flatten", reduction: str = "mean",
                            rng: Any = None) -> "torch.Tensor":
    r"""The spectral alignment regulariser of a diffusion model's hidden states (reconstructed).

    The Gaussian kernel that noises a clean sample, :math:`x_t = (1 - t) x_0 + t \varepsilon`, is read as the
    random augmentation of spectral contrastive learning: two noisings of the same :math:`x_0` are a positive
    pair, noisings of other items of the batch its negatives. The regulariser is the spectral contrastive loss
    (:func:`spectral_contrastive_loss`) between the projected hidden states of the two views,

    .. math:: L = L_{spec}\big(h_\phi(h(x_{t_1}, t_1)),\ h_\phi(h(x'_{t_2}, t_2))\big),

    with independent noises :math:`\varepsilon, \varepsilon'` (t2 = t1 when t2 is None). With a ``target``
    ("spectral REPA") the second view is a frozen encoder's features of the clean sample,
    :math:`L_{spec}(h_\phi(h(x_{t_1}, t_1)), y(x_0))`: REPA's pairing with the spectral loss in place of the
    negative cosine.

    **Reconstructed.** The paper (spectral alignment for diffusion, ICML 2026) states that its regulariser
    links the Gaussian perturbation kernels to spectral contrastive learning and adds a self-supervised
    alignment term to the diffusion loss; which views are paired, where the hidden state is read and how it
    is normalised are inferred. The open choices are parameters: the times (``t1``, ``t2``), shared or
    independent noise (``same_noise``), the norm clipping (``mu``, ``clip``), tokens as samples or pooled
    (``tokens``), and the projector.

    Parameters
    ----------
    hidden_fn : callable
        ``hidden_fn(x_t, t) -> h``: the model's hidden state, shape (B, D) or (B, N, D), for noised data
        ``x_t`` (the shape of ``x0``) at times ``t`` of shape (B,).
    x0 : torch.Tensor, shape (B, ...)
        Clean data.
    t1 : float or torch.Tensor
        Time(s) of the first view, in [0, 1] (t = 1 is noise), one or one per item (shape (B,)).
    t2 : float, torch.Tensor or 'uniform', optional
        Time(s) of the second view; None: those of the first (two noise draws at one level); ``'uniform'``: drawn
        uniformly on [0, 1] per item, independently of ``t1`` (two noise levels). Not used with a ``target``.
    projector : callable or None
        Maps hidden states (..., D) to embeddings (..., k) (:func:`build_projector`); None uses ``h`` itself.
    target : torch.Tensor or callable, optional
        Frozen features of the clean data, shape (B, ..., k) like the projected hidden states, or a callable
        ``target(x0)`` evaluated under ``torch.no_grad()``. Given: "spectral REPA".
    mu : float, default 1.0
        The spectral loss's scale: norms clipped at sqrt(mu), loss divided by mu.
    clip : bool, default True
        Clip the embeddings' norms at sqrt(mu) (the authors' spectral loss does); the loss is not scale
        invariant, so leave it on unless the projector normalises.
    same_noise : bool, default False
        Both views noise ``x0`` with the same :math:`\varepsilon` (two points of one noising path); needs
        ``t2`` (with one time the views would coincide).
    tokens : {'flatten', 'mean'}, default 'flatten'
        For hidden states with tokens: every token is a sample (its positive is the same token of the other
        view, every other token of the batch a negative), or the tokens of an item are averaged first.
    reduction : {'mean', 'sum', 'none'}, default 'mean'
        ``'none'``: the per-anchor terms of :func:`spectral_contrastive_loss`, shape (B,) or (B, N).
    rng : None, int, numpy.random.Generator or torch.Generator
        Draws the noises.

    Returns
    -------
    torch.Tensor
        The regulariser, differentiable in the model's and the projector's parameters (through both views).

    See Also
    --------
    diffusion_loss : the denoising loss with this term added, sharing the first view's forward pass.

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.spectral import build_projector, spectral_alignment_loss
    >>> net = torch.nn.Linear(3, 8)                                   # hidden state of (x_t, t)
    >>> hidden = lambda x, t: torch.tanh(net(torch.cat([x, t[:, None]], dim=1)))
    >>> x0 = torch.randn(16, 2, generator=torch.Generator().manual_seed(0))
    >>> loss = spectral_alignment_loss(hidden, x0, t1=0.3, projector=build_projector(8, 4, hidden=16, rng=0),
    ...                                rng=0)
    >>> loss.shape, bool(loss < 0)
    (torch.Size([]), True)
    """
    _check_callable(hidden_fn, "hidden_fn")
    check_tensor(x0, "x0")
    if x0.ndim < 1 or x0.shape[0] < 2:
        raise ValueError(f"`x0` must be a batch of at least 2 items, shape (B, ...) (the spectral loss takes its "
                         f"negatives from the other items); got shape {tuple(x0.shape)}")
    _check_module_input(hidden_fn, x0, "hidden_fn", "x0")
    projector = _check_callable(projector, "projector", optional=True)
    clip = check_bool(clip, "clip")
    same_noise = check_bool(same_noise, "same_noise")
    tokens = check_option(tokens, "tokens", _TOKENS)
    check_reduction(reduction)
    check_real(mu, "mu", low=0.0, low_open=True)
    ta = _times(t1, "t1", x0)
    uniform_t2 = _is_uniform(t2)
    tb = ta if t2 is None or uniform_t2 else _times(t2, "t2", x0)
    if same_noise and t2 is None and target is None:
        raise ValueError("`same_noise` needs `t2` (with one time and one noise the two views coincide)")
    if target is not None and not isinstance(target, torch.Tensor):
        _check_callable(target, "target")
    gen = _generator(rng, x0)
    if uniform_t2:
        tb = torch.rand(x0.shape[0], generator=gen, dtype=x0.dtype, device=x0.device)
    eps = _gaussian_noise(x0, gen)
    xa = (1.0 - _expand_time(ta, x0)) * x0 + _expand_time(ta, x0) * eps
    z1 = _project(projector, _hidden(hidden_fn, xa, ta, "hidden_fn"), name_h="the hidden states")
    if target is not None:
        return _spectral_pair(z1, _target_features(target, x0), mu=mu, clip=clip, tokens=tokens,
                              reduction=reduction, name2="target")
    eps2 = eps if same_noise else _gaussian_noise(x0, gen)
    xb = (1.0 - _expand_time(tb, x0)) * x0 + _expand_time(tb, x0) * eps2
    z2 = _project(projector, _hidden(hidden_fn, xb, tb, "hidden_fn"), name_h="the hidden states")
    return _spectral_pair(z1, z2, mu=mu, clip=clip, tokens=tokens, reduction=reduction, name2="hidden_fn")


def _model_outputs(model: Any, x: "torch.Tensor", t: "torch.Tensor", need_hidden: bool) -> tuple:
    out = model(x, t)
    if isinstance(out, (tuple, list)):
        if len(out) != 2 or not all(isinstance(o, torch.Tensor) for o in out):
            raise TypeError("`model` must return a tensor or a pair of tensors (prediction, hidden)")
        pred, hidden = out
    elif isinstance(out, torch.Tensor):
        if need_hidden:
            raise TypeError("`model` must return (prediction, hidden) when a regularizer reads its hidden states")
        pred, hidden = out, None
    else:
        raise TypeError(f"`model` must return a tensor or (prediction, hidden); got {type(out).__name__}")
    if pred.shape != x.shape:
        raise ValueError(f"`model` must predict the velocity in the shape of `x0`, {tuple(x.shape)}; got "
                         f"{tuple(pred.shape)}")
    if hidden is not None and (hidden.ndim < 2 or hidden.shape[0] != x.shape[0]):
        raise ValueError(f"`model` must return hidden states of shape (B, ..., D) with B = {x.shape[0]}; got "
                         f"{tuple(hidden.shape)}")
    return pred, hidden


@constraints(model="callable", x0="tensor", regularizer="option", lam="real>=0", projector="callable",
             target=("tensor", "callable"), t=("prob", "tensor"), t2=("prob", "tensor", "option"), mu="real>0",
             clip="bool",
             tokens="option", rng="rng")
def diffusion_loss(model: Callable, x0: "torch.Tensor", *, regularizer: str | None = None, lam: float = 0.5,
                   projector: Callable | None = None, target: Any = None, t: Any = None, t2: Any = "uniform",
                   mu: float = 1.0, clip: bool = True, tokens: str = "flatten", rng: Any = None) -> Result:
    r"""The denoising loss of a v-prediction diffusion model with an optional alignment term.

    One training loss for the three alignments, built like REPA's ``SILoss``: draw t (uniform on [0, 1] per
    item unless given) and :math:`\varepsilon`, noise :math:`x_t = (1 - t) x_0 + t\varepsilon`
    (:func:`linear_interpolant`), call ``model(x_t, t) -> (v, h)``; the denoising loss is the mean over items of
    the mean squared error :math:`\|v - (\varepsilon - x_0)\|^2 / \dim`, and

    .. math:: \text{loss} = \text{denoise} + \lambda\, \text{align}.

    The alignment term, by ``regularizer``:

    * None: none (``align`` is None; the model may return the prediction alone);
    * ``'repa'``: :func:`repa_loss` of the projected hidden state against ``target`` (REPA; its lam is 0.5);
    * ``'spectral'``: the spectral alignment of :func:`spectral_alignment_loss`; the first view is the
      denoising pass itself (its hidden state is reused), the second a second forward pass on an independent
      noising of the same :math:`x_0` at ``t2`` (by default an independent uniform time: two noise levels). The
      second pass's prediction is not part of the denoising loss, so the denoising term is the plain one, on
      the same draws;
    * ``'spectral_repa'``: the spectral loss between the projected hidden state and ``target`` (no second
      pass).

    **Reconstructed** for the spectral terms (see :func:`spectral_alignment_loss`); REPA's term and the
    denoising loss follow REPA's code.

    Parameters
    ----------
    model : callable
        ``model(x_t, t)`` with t of shape (B,): the velocity prediction (the shape of ``x0``), with a
        regularizer the pair ``(prediction, hidden)``, hidden of shape (B, D) or (B, N, D).
    x0 : torch.Tensor, shape (B, ...)
        A batch of clean data.
    regularizer : {None, 'spectral', 'spectral_repa', 'repa'}, default None
        The alignment term.
    lam : float, default 0.5
        Its weight λ >= 0.
    projector : callable, optional
        Hidden state -> embedding (:func:`build_projector`; train its parameters with the model's). None: the
        hidden state itself.
    target : torch.Tensor or callable, optional
        For ``'repa'`` and ``'spectral_repa'`` (required there): frozen features of ``x0``, shape (B, ..., k),
        or a callable ``target(x0)`` run under ``torch.no_grad()``.
    t : float or torch.Tensor, optional
        Times of the denoising pass, in [0, 1], one or one per item; None draws them uniformly.
    t2 : float, torch.Tensor, 'uniform' or None, default 'uniform'
        Times of the second view of ``'spectral'``: ``'uniform'`` draws them uniformly and independently of
        ``t`` (two noise levels); None uses ``t`` itself (two noise draws at one level). The default is the
        pairing measured better in :func:`demo`'s setting: with one level, the linear probe of the hidden state
        fitted at low noise and tested at higher noise fell to 0.50 (plain training 0.82; three seeds), and in
        trials with a linear projector the denoising loss rose by 3-6 %.
    mu, clip : float, bool
        Of the spectral loss (:func:`spectral_contrastive_loss`).
    tokens : {'flatten', 'mean'}, default 'flatten'
        Of the spectral loss with token hidden states (:func:`spectral_alignment_loss`).
    rng : None, int, numpy.random.Generator or torch.Generator
        Draws t and the noises. For a training loop pass one ``torch.Generator`` (it advances).

    Returns
    -------
    Result
        loss : torch.Tensor
            The total, 0-D, to call ``backward()`` on.
        denoise : torch.Tensor
            The denoising term.
        align : torch.Tensor or None
            The alignment term (before λ); None without a regularizer.
        t : torch.Tensor
            The times used, shape (B,).

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.spectral import build_projector, diffusion_loss
    >>> class Net(torch.nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.body, self.head = torch.nn.Linear(3, 16), torch.nn.Linear(16, 2)
    ...     def forward(self, x, t):
    ...         h = torch.tanh(self.body(torch.cat([x, t[:, None]], dim=1)))
    ...         return self.head(h), h
    >>> x0 = torch.randn(32, 2, generator=torch.Generator().manual_seed(0))
    >>> res = diffusion_loss(Net(), x0, regularizer="spectral", lam=0.1,
    ...                      projector=build_projector(16, 4, hidden=32, rng=0), rng=0)
    >>> res.loss.shape, bool(torch.isclose(res.loss, res.denoise + 0.1 * res.align))
    (torch.Size([]), True)
    >>> diffusion_loss(Net(), x0, rng=0).align is None
    True
    """
    _check_callable(model, "model")
    check_tensor(x0, "x0")
    if x0.ndim < 1 or x0.shape[0] < 1:
        raise ValueError(f"`x0` must be a non-empty batch, shape (B, ...); got {tuple(x0.shape)}")
    if regularizer is not None:
        check_option(regularizer, "regularizer", _REGULARIZERS[1:])
        if regularizer.startswith("spectral") and x0.shape[0] < 2:
            raise ValueError(f"`x0` must be a batch of at least 2 items for regularizer={regularizer!r} (the "
                             f"spectral loss takes its negatives from the other items); got shape {tuple(x0.shape)}")
    _check_module_input(model, x0, "model", "x0")
    lam = check_real(lam, "lam", low=0.0)
    if lam > torch.finfo(x0.dtype).max:
        raise ValueError(f"`lam` must be at most the largest {x0.dtype} ({torch.finfo(x0.dtype).max:g}); got {lam!r}")
    projector = _check_callable(projector, "projector", optional=True)
    clip = check_bool(clip, "clip")
    tokens = check_option(tokens, "tokens", _TOKENS)
    check_real(mu, "mu", low=0.0, low_open=True)
    if regularizer in ("repa", "spectral_repa"):
        if target is None:
            raise ValueError(f"`target` is required by regularizer={regularizer!r} (frozen features of x0)")
        if not isinstance(target, torch.Tensor):
            _check_callable(target, "target")
    gen = _generator(rng, x0)
    B = x0.shape[0]
    ta = torch.rand(B, generator=gen, dtype=x0.dtype, device=x0.device) if t is None else _times(t, "t", x0)
    uniform_t2 = _is_uniform(t2)
    tb = ta if t2 is None or uniform_t2 else _times(t2, "t2", x0)
    eps = _gaussian_noise(x0, gen)
    x_t, v_target = linear_interpolant(x0, eps, ta)
    pred, hidden = _model_outputs(model, x_t, ta, regularizer is not None)
    denoise = ((pred - v_target) ** 2).reshape(B, -1).mean(dim=1).mean()
    align = None
    if regularizer == "repa":
        y = _target_features(target, x0)
        if y.shape[:-1] != hidden.shape[:-1]:
            raise ValueError(f"`target` must have the leading dimensions of the hidden states, "
                             f"{tuple(hidden.shape[:-1])}; got {tuple(y.shape)}")
        _check_module_input(projector, hidden, "projector", "the hidden states")
        align = repa_loss(hidden, y, projector)
    elif regularizer == "spectral_repa":
        z1 = _project(projector, hidden, name_h="the hidden states")
        align = _spectral_pair(z1, _target_features(target, x0), mu=mu, clip=clip, tokens=tokens,
                               reduction="mean", name2="target")
    elif regularizer == "spectral":
        z1 = _project(projector, hidden, name_h="the hidden states")
        if uniform_t2:
            tb = torch.rand(B, generator=gen, dtype=x0.dtype, device=x0.device)
        x_b, _ = linear_interpolant(x0, _gaussian_noise(x0, gen), tb)
        _, hidden_b = _model_outputs(model, x_b, tb, True)
        align = _spectral_pair(z1, _project(projector, hidden_b), mu=mu, clip=clip, tokens=tokens,
                               reduction="mean", name2="model")
    loss = denoise if align is None else denoise + lam * align
    return Result(loss=loss, denoise=denoise, align=align, t=ta)
