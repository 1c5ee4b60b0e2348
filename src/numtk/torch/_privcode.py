"""PrivCode++: per-sample gradients by torch.func, the DP-SGD step with flat per-example clipping, the RDP accountant
of the Poisson-subsampled Gaussian mechanism and its inverse, the syntax-aware KL between a DP model and a frozen
reference on AST structural tokens, latent prefixes (PrivLC, reconstructed), and canary exposure.

The accounting arithmetic (NumPy) lives in :mod:`numtk.torch._accounting`, shared with ``numtk.torch.pisa``.
"""

from __future__ import annotations

import ast
import math
import re
import warnings
from typing import Any, Sequence

import numpy as np

from numtk._lib import Result
from numtk._lib._constraints import constraints
from numtk._lib._validation import check_int, check_option, check_real, check_size
from numtk.torch import _accounting
from numtk.torch._common import (check_callable, check_reduction, check_tensor, device_generator, reduce_loss,
                                 torch, torch_generator)

__all__ = ["per_sample_grads", "dp_sgd_step", "poisson_sample", "sampled_gaussian_rdp", "rdp_epsilon",
           "noise_multiplier_for", "lambda_schedule", "structural_token_mask", "syntax_aware_kl", "LatentPrefix",
           "canary_exposure", "STRUCTURAL_NODES", "OPACUS_ORDERS"]

#: The AST node types whose spans are "structural" in PrivCode (loops, branches, definitions).
STRUCTURAL_NODES = ("For", "If", "While", "FunctionDef", "ClassDef")
#: Opacus's default grid of Renyi orders (``orders="opacus"``): 1.1, 1.2, ..., 10.9 and the integers 12 .. 63.
OPACUS_ORDERS = _accounting.OPACUS_ORDERS

_METHODS = ("vmap", "loop")
_DIRECTIONS = ("ref||dp", "dp||ref")
_MAX_STEPS = 10**9


# --------------------------------------------------------------------------------------------------
# per-sample gradients
# --------------------------------------------------------------------------------------------------
class _Functional:
    """The model as ``loss_fn`` sees it inside :func:`per_sample_grads`: calling it runs the model's forward with
    the parameters being differentiated (``torch.func.functional_call``); attributes (``config`` ...) are the
    model's."""

    def __init__(self, model: Any, params: dict) -> None:
        self._model = model
        self._params = params

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return torch.func.functional_call(self._model, self._params, args, kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)


def _check_model(model: Any) -> "torch.nn.Module":
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"`model` must be a torch.nn.Module; got {type(model).__name__}")
    return model


def _check_batch(batch: Any) -> tuple[list, Any, int]:
    """The leaves of ``batch`` (a tensor, a tuple/list of tensors or a dict of tensors), its structure and its
    size (the common leading dimension)."""
    from torch.utils import _pytree

    if isinstance(batch, torch.Tensor):
        leaves, spec = [batch], None
    elif isinstance(batch, (tuple, list, dict)):
        if isinstance(batch, dict) and not all(isinstance(k, str) for k in batch):
            raise TypeError("`batch` as a dict must have str keys")
        leaves, spec = _pytree.tree_flatten(batch)
    else:
        raise TypeError(f"`batch` must be a tensor, a tuple or list of tensors, or a dict of tensors; "
                        f"got {type(batch).__name__}")
    if not leaves:
        raise ValueError("`batch` must hold at least one tensor")
    for t in leaves:
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"`batch` must hold only tensors; got a {type(t).__name__}")
        if t.ndim == 0:
            raise ValueError("`batch` tensors need a leading batch dimension; got a 0-D tensor")
        if t.is_floating_point() and t.numel() and not bool(torch.isfinite(t).all()):
            raise ValueError("`batch` must be finite (a tensor holds NaN or infinity)")
    sizes = {int(t.shape[0]) for t in leaves}
    if len(sizes) > 1:
        raise ValueError(f"`batch` tensors must share their leading (batch) dimension; got sizes {sorted(sizes)}")
    return leaves, spec, sizes.pop()


def _trainable(model: "torch.nn.Module") -> tuple[dict, dict]:
    """(parameters that require grad, every other parameter and buffer, detached), by name."""
    train, frozen = {}, {}
    for name, p in model.named_parameters():
        (train if p.requires_grad else frozen)[name] = p.detach() if not p.requires_grad else p
    for name, b in model.named_buffers():
        frozen[name] = b
    if not train:
        raise ValueError("`model` has no parameter that requires grad (nothing to differentiate)")
    return train, frozen


def _per_sample(model: "torch.nn.Module", loss_fn: Any, batch: Any, leaves: list, spec: Any, n: int,
                chunk_size: int | None, method: str) -> tuple[dict, "torch.Tensor"]:
    """Per-example gradients (name -> (n, *shape)) and per-example losses (n,)."""
    from torch.utils import _pytree

    train, frozen = _trainable(model)
    names = list(train)

    def rebuild(ls: list) -> Any:
        return ls[0] if spec is None else _pytree.tree_unflatten(ls, spec)

    if method == "loop":
        tensors = [train[k] for k in names]
        grads = {k: [] for k in names}
        losses = []
        for i in range(n):
            loss = loss_fn(model, rebuild([t[i:i + 1] for t in leaves]))
            _check_loss(loss)
            gs = torch.autograd.grad(loss, tensors, allow_unused=True)
            for k, g, p in zip(names, gs, tensors):
                grads[k].append(torch.zeros_like(p) if g is None else g)
            losses.append(loss.detach())
        return {k: torch.stack(v) for k, v in grads.items()}, torch.stack(losses)

    detached = {k: v.detach() for k, v in train.items()}

    def one(params: dict, ex_leaves: list) -> "torch.Tensor":
        ex = rebuild([t.unsqueeze(0) for t in ex_leaves])
        loss = loss_fn(_Functional(model, {**frozen, **params}), ex)
        _check_loss(loss)
        return loss

    fn = torch.func.vmap(torch.func.grad_and_value(one), in_dims=(None, 0), randomness="different",
                         chunk_size=chunk_size)
    with warnings.catch_warnings():
        # operations without a batching rule (CPU flash attention ...) run example by example: correct, slower
        warnings.filterwarnings("ignore", message="There is a performance drop because we have not yet implemented")
        grads, losses = fn(detached, list(leaves))
    return {k: grads[k] for k in names}, losses.detach()


def _transformed(t: "torch.Tensor") -> bool:
    """Whether ``t`` is wrapped by a torch.func transform (vmap, grad): value checks (``.item()``, data-dependent
    branches) cannot run on it, shape checks can."""
    f = getattr(getattr(torch._C, "_functorch", None), "is_functorch_wrapped_tensor", None)
    return bool(f(t)) if f is not None and isinstance(t, torch.Tensor) else False


def _check_loss(loss: Any) -> None:
    if not isinstance(loss, torch.Tensor) or loss.ndim != 0:
        raise ValueError("`loss_fn` must return a scalar (0-D) tensor: the loss of the batch it is given (the "
                         "mean over its examples; here one example)")


def _check_common(model: Any, loss_fn: Any, batch: Any, chunk_size: Any, method: Any) -> tuple:
    model = _check_model(model)
    check_callable(loss_fn, "loss_fn")
    leaves, spec, n = _check_batch(batch)
    if chunk_size is not None:
        chunk_size = check_int(chunk_size, "chunk_size", minimum=1, maximum=2**31 - 1)
    method = check_option(method, "method", _METHODS)
    return model, leaves, spec, n, chunk_size, method


@constraints(model="any", loss_fn="callable", batch="any", chunk_size="int>=1", method="option")
def per_sample_grads(model: Any, loss_fn: Any, batch: Any, *, chunk_size: int | None = None,
                     method: str = "vmap") -> dict:
    """Per-example gradients of a loss with respect to the model's parameters that require grad.

    With ``method="vmap"`` (the default) the gradient of one example's loss is taken by
    :func:`torch.func.grad` through :func:`torch.func.functional_call` and vectorised over the batch by
    :func:`torch.func.vmap` (one batched forward and backward, no hooks, any architecture whose operations vmap
    supports); ``method="loop"`` runs one backward pass per example (slow; for modules vmap cannot batch).
    Parameters with ``requires_grad=False`` are held fixed: freeze all but a subset (LoRA-like adapters, the last
    block) to get the gradients of that subset only.

    Parameters
    ----------
    model : torch.nn.Module
        The model; its mode (train/eval) is used as is (dropout draws differ per example under vmap).
    loss_fn : callable
        ``loss_fn(model, batch) -> scalar tensor``: the mean loss of the examples of ``batch``. It is called
        with a single example at a time (every tensor with a leading dimension of 1) and, under vmap, with a
        stand-in for ``model`` that runs the model's forward with the parameters being differentiated (its
        attributes are the model's). Write it as for an ordinary training step, e.g.
        ``lambda m, b: F.cross_entropy(m(b[0]), b[1])``.
    batch : tensor, tuple or list of tensors, or dict of tensors
        The examples, every tensor with the same leading (batch) dimension B >= 1.
    chunk_size : int, optional
        Examples per vmap chunk (memory: per-sample gradients of ``chunk_size`` examples at a time); None: all.
    method : {'vmap', 'loop'}, default 'vmap'
        Vectorised by torch.func, or one backward per example.

    Returns
    -------
    dict of str to torch.Tensor
        Parameter name (as in ``model.named_parameters()``) -> per-example gradients, shape ``(B, *param.shape)``.

    Notes
    -----
    Under vmap, ``loss_fn`` cannot branch on tensor values (``if x.any():``, ``.item()``). ``transformers``
    models build their causal mask from a 2-D ``attention_mask`` with such branches: inside ``loss_fn`` call them
    without it, padding on the right and setting the padded labels to -100 (exact for a causal LM), or with a
    ready 4-D additive mask; ``method="loop"`` works for any model. Operations without a vmap batching rule (CPU
    flash attention's backward) fall back to a per-example loop inside vmap: correct, slower (``attn_implementation=
    "eager"`` avoids it).

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.privcode import per_sample_grads
    >>> lin = torch.nn.Linear(3, 1)
    >>> x, y = torch.randn(5, 3), torch.randn(5, 1)
    >>> g = per_sample_grads(lin, lambda m, b: ((m(b[0]) - b[1]) ** 2).mean(), (x, y))
    >>> g["weight"].shape
    torch.Size([5, 1, 3])
    >>> full = torch.func.grad(lambda w: ((x @ w.T + lin.bias - y) ** 2).mean())(lin.weight.detach())
    >>> torch.allclose(g["weight"].mean(0), full, atol=1e-6)   # their mean is the batch gradient
    True
    """
    model, leaves, spec, n, chunk_size, method = _check_common(model, loss_fn, batch, chunk_size, method)
    if n == 0:
        raise ValueError("`batch` must hold at least one example (its leading dimension is 0)")
    grads, _ = _per_sample(model, loss_fn, batch, leaves, spec, n, chunk_size, method)
    return grads


# --------------------------------------------------------------------------------------------------
# the DP-SGD step
# --------------------------------------------------------------------------------------------------
_DP_METHODS = ("vmap", "loop", "ghost")


def _ghost_owners(model: "torch.nn.Module", train: dict) -> dict:
    """Trainable parameter name -> [(Linear module, 'weight' or 'bias'), ...]; a ValueError naming the first
    parameter that some other module owns (method='ghost' sees only what passes through ``nn.Linear.forward``)."""
    owners: dict = {id(p): [] for p in train.values()}
    for mod in model.modules():
        for role, p in mod._parameters.items():
            if p is not None and id(p) in owners:
                owners[id(p)].append((mod, role))
    out = {}
    for name, p in train.items():
        for mod, role in owners[id(p)]:
            if type(mod).forward is not torch.nn.Linear.forward or role not in ("weight", "bias"):
                raise ValueError(f"method='ghost' clips only the parameters of torch.nn.Linear layers; the trainable "
                                 f"parameter {name!r} belongs to a {type(mod).__name__}: use method='vmap' (or "
                                 f"freeze it)")
        out[name] = owners[id(p)]
    return out


def _ghost_cat(ts: list) -> "torch.Tensor":
    return ts[0] if len(ts) == 1 else torch.cat(ts, 1)


def _ghost_sq_norms(role: str, a: "torch.Tensor | None", g: "torch.Tensor") -> tuple:
    """Per-example squared gradient norms (n,) of a Linear's weight or bias from its inputs a (n, T, in) and
    output gradients g (n, T, out), and the per-example gradients when they were formed (else None)."""
    if role == "bias":
        return g.sum(1).square().sum(1), None
    n, T, d_in = a.shape
    d_out = g.shape[2]
    if T == 1:
        return a.square().sum((1, 2)) * g.square().sum((1, 2)), None
    if T * (d_in + d_out) <= d_in * d_out:
        # the Gram form: ||sum_t g_t a_t^T||_F^2 = sum_{t,s} (a_t . a_s)(g_t . g_s), O(T^2 (in + out))
        gram = (a @ a.transpose(1, 2)) * (g @ g.transpose(1, 2))
        return gram.sum((1, 2)).clamp_min(0.0), None
    per = g.transpose(1, 2) @ a                                  # (n, out, in), O(T in out)
    return per.square().sum((1, 2)), per


def _ghost_clipped(model: "torch.nn.Module", loss_fn: Any, batch: Any, n: int, train: dict, owners: dict,
                   clip_norm: float) -> tuple:
    """Method 'ghost' of :func:`dp_sgd_step`: (clipped sums by name, per-example norms (n,), summed loss) from one
    forward and backward of the whole batch, without per-example gradients where they can be avoided."""
    calls: dict = {}                                             # Linear module -> [[a, g], ...]
    handles = []

    def hook(mod: Any, args: tuple, output: Any) -> None:
        if not args or not isinstance(args[0], torch.Tensor) or not isinstance(output, torch.Tensor):
            return
        a = args[0]
        if a.ndim < 2 or a.shape[0] != n or output.shape[0] != n:
            raise ValueError(f"method='ghost' needs every Linear's input to have the batch's examples on its "
                             f"leading dimension (size {n}); a Linear got an input of shape {tuple(a.shape)}: "
                             f"use method='vmap'")
        if not output.requires_grad:
            return
        slot = [a.detach(), None]
        calls.setdefault(mod, []).append(slot)

        def grab(grad: "torch.Tensor") -> None:
            slot[1] = grad.detach()
        output.register_hook(grab)

    modules = {mod for pairs in owners.values() for mod, _ in pairs}
    try:
        for mod in modules:
            handles.append(mod.register_forward_hook(hook))
        with torch.enable_grad():
            loss = loss_fn(model, batch)
            if not isinstance(loss, torch.Tensor) or loss.ndim != 0:
                raise ValueError("`loss_fn` must return a scalar (0-D) tensor: with method='ghost', the SUM of "
                                 "the losses of the examples of the whole batch it is given")
            names = list(train)
            if loss.requires_grad:
                # every parameter as an input: the hooks fire wherever the loss depends on a Linear's output
                grads = torch.autograd.grad(loss, [train[k] for k in names], allow_unused=True)
                used = [g is not None for g in grads]
                del grads
            else:
                used = [False] * len(names)
    finally:
        for h in handles:
            h.remove()
    loss = float(loss.detach())

    tokens: dict = {}                                            # module -> (a (n, T, in), g (n, T, out)) or None
    for mod, lst in calls.items():
        done = [(a, g) for a, g in lst if g is not None]
        if not done:
            tokens[mod] = None
            continue
        tokens[mod] = (_ghost_cat([a.reshape(n, -1, a.shape[-1]) for a, _ in done]),
                       _ghost_cat([g.reshape(n, -1, g.shape[-1]) for _, g in done]))

    first = next(iter(train.values()))
    sq = torch.zeros(n, dtype=first.dtype, device=first.device)
    parts: dict = {}
    for k, in_graph in zip(names, used):
        pairs = [(tokens.get(mod), role) for mod, role in owners[k]]
        pairs = [(ag, role) for ag, role in pairs if ag is not None]
        if not pairs:
            if in_graph:
                raise ValueError(f"method='ghost': the loss depends on {k!r} other than through its Linear's "
                                 f"forward (no hooked call saw it): use method='vmap'")
            parts[k] = None
            continue
        role = pairs[0][1]
        a = None if role == "bias" else _ghost_cat([ag[0] for ag, _ in pairs])
        g = _ghost_cat([ag[1] for ag, _ in pairs])
        s, per = _ghost_sq_norms(role, a, g)
        sq = sq + s.to(sq.dtype)
        parts[k] = (role, a, g, per)
    norms = sq.clamp_min(0.0).sqrt()
    factor = (clip_norm / norms).clamp(max=1.0)                  # norm 0 -> inf -> 1; C = inf -> 1
    factor = torch.where(torch.isnan(factor), torch.ones_like(factor), factor)
    summed = {}
    for k, p in train.items():
        if parts[k] is None:
            summed[k] = torch.zeros_like(p)
            continue
        role, a, g, per = parts[k]
        c = factor.to(g.dtype)
        if role == "bias":
            summed[k] = c @ g.sum(1)
        elif per is not None:
            summed[k] = torch.tensordot(c, per, dims=1)
        else:
            summed[k] = (g * c[:, None, None]).reshape(-1, g.shape[2]).T @ a.reshape(-1, a.shape[2])
    return summed, norms, loss


@constraints(model="any", loss_fn="callable", batch="any", optimizer="any", clip_norm="real>0",
             noise_multiplier="real>=0", rng="rng", expected_batch_size="real>0", chunk_size="int>=1",
             method="option")
def dp_sgd_step(model: Any, loss_fn: Any, batch: Any, optimizer: Any, *, clip_norm: float,
                noise_multiplier: float, rng: Any = None, expected_batch_size: float | None = None,
                chunk_size: int | None = None, method: str = "vmap") -> Result:
    """One DP-SGD step (Abadi et al. 2016): per-example gradients, flat clipping, summed Gaussian noise.

    For the parameters that require grad, with per-example gradients g_i (all parameters flattened into one
    vector), the step sets each parameter's ``.grad`` to its slice of

    .. math::

        \\tilde g = \\frac{1}{B_e}\\Big(\\sum_{i=1}^{B} g_i \\min\\big(1, C / \\lVert g_i \\rVert_2\\big)
        + \\mathcal N(0, \\sigma^2 C^2 I)\\Big)

    and then calls ``optimizer.step()``. The divisor B_e is the *expected* batch size when given
    (``expected_batch_size``), as Opacus does for Poisson-sampled batches: with sampling rate q over N records
    it is q N, a constant, so that the divisor reveals nothing about the batch; without it the divisor is the
    batch's own size B (right for fixed-size batches, and then the accountant's q is B / N with sampling
    without replacement only approximately covered). The privacy of a run of such steps is
    :func:`rdp_epsilon` of (q, ``noise_multiplier``, steps, delta) for Poisson sampling with rate q
    (:func:`poisson_sample`): a record is one example of ``batch``, adjacency is adding or removing one.
    Clipping is flat (one norm over every trainable parameter); per-layer clipping changes that bookkeeping and
    is not offered. An empty batch (possible under Poisson sampling) gives pure noise.

    ``method="ghost"`` computes the same step without per-example gradients (ghost clipping, Goodfellow 2015;
    Li et al. 2022) for models whose trainable parameters all belong to :class:`torch.nn.Linear` layers: one
    forward and backward of the whole batch, hooks that keep each Linear's input :math:`a_i` and output gradient
    :math:`e_i`, the per-example norms from them (:math:`\\lVert a_i\\rVert^2 \\lVert e_i\\rVert^2` for a 2-D
    input; for an input ``(B, T, in)`` either :math:`\\sum_{t,s} (a_{it} \\cdot a_{is})(e_{it} \\cdot e_{is})` or the
    per-example ``(out, in)`` gradient, whichever is cheaper), then the clipped sum as one contraction per layer.
    Its ``loss_fn`` is called once with the whole batch and must return the **sum** of the per-example losses
    (``F.cross_entropy(..., reduction="sum")``): a mean would scale every example's gradient, so the clipping
    and the step, by 1/B. Example i's loss must depend only on row i of every Linear's input and output (no
    batch statistics), every Linear's input must carry the examples on its leading dimension, and a Linear's
    parameters must not be used outside its forward (``nn.MultiheadAttention`` does); a trainable parameter of
    any other module (an embedding, a norm) is a ValueError.

    Parameters
    ----------
    model : torch.nn.Module
        The model; its parameters that require grad are the ones trained (and clipped together).
    loss_fn : callable
        ``loss_fn(model, batch) -> scalar`` as in :func:`per_sample_grads` (the mean loss of the examples it is
        given, one at a time); with ``method="ghost"`` the *sum* of the losses of the whole batch (see above).
    batch : tensor, tuple or list of tensors, or dict of tensors
        The examples (leading dimension B >= 0).
    optimizer : torch.optim.Optimizer or None
        Stepped once after the gradients are set; None: only set ``.grad`` (they replace any previous value).
    clip_norm : float
        C > 0, the bound on each example's gradient norm (``inf``: no clipping, only with
        ``noise_multiplier=0``).
    noise_multiplier : float
        sigma >= 0: the noise standard deviation is sigma C.
    rng : None, int, numpy.random.Generator or torch.Generator, optional
        The noise's source (a torch.Generator must be on the parameters' device). torch's generators are not
        cryptographically secure: for a deployed guarantee draw the seed from the operating system (None).
    expected_batch_size : float, optional
        B_e > 0 (see above); None: the batch's size.
    chunk_size : int, optional
        Examples per vmap chunk (see :func:`per_sample_grads`); unused by ``method="ghost"``.
    method : {'vmap', 'loop', 'ghost'}, default 'vmap'
        How the per-example gradients, or their norms, are computed: 'vmap' and 'loop' as in
        :func:`per_sample_grads` (any architecture), 'ghost' by ghost clipping (Linear layers only; far cheaper on
        wide layers and large batches).

    Returns
    -------
    Result
        loss : float
            The mean of the per-example losses (NaN for an empty batch).
        per_sample_norms : torch.Tensor
            The (B,) per-example gradient norms before clipping.
        clip_fraction : float
            The fraction of examples whose norm exceeded C (NaN for an empty batch).
        batch_size : int
            B.
        divisor : float
            B_e, the number the noisy sum was divided by.
        noise_std : float
            sigma C / B_e, the standard deviation of the noise in each coordinate of the gradient set.

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.privcode import dp_sgd_step
    >>> torch.manual_seed(0) and None
    >>> model = torch.nn.Linear(4, 2)
    >>> opt = torch.optim.SGD(model.parameters(), lr=0.1)
    >>> x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
    >>> loss_fn = lambda m, b: torch.nn.functional.cross_entropy(m(b[0]), b[1])
    >>> res = dp_sgd_step(model, loss_fn, (x, y), opt, clip_norm=0.5, noise_multiplier=1.0, rng=0)
    >>> res.per_sample_norms.shape, res.noise_std
    (torch.Size([8]), 0.0625)

    Ghost clipping: the same step from the summed loss, without per-example gradients.

    >>> sum_fn = lambda m, b: torch.nn.functional.cross_entropy(m(b[0]), b[1], reduction="sum")
    >>> a = dp_sgd_step(model, loss_fn, (x, y), None, clip_norm=0.5, noise_multiplier=0.0)
    >>> w = model.weight.grad.clone()
    >>> b = dp_sgd_step(model, sum_fn, (x, y), None, clip_norm=0.5, noise_multiplier=0.0, method="ghost")
    >>> torch.allclose(model.weight.grad, w, atol=1e-6), torch.allclose(a.per_sample_norms, b.per_sample_norms)
    (True, True)
    """
    method = check_option(method, "method", _DP_METHODS)
    ghost = method == "ghost"
    model, leaves, spec, n, chunk_size, method = _check_common(model, loss_fn, batch, chunk_size,
                                                               "vmap" if ghost else method)
    if optimizer is not None and not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(f"`optimizer` must be a torch.optim.Optimizer or None; got {type(optimizer).__name__}")
    if isinstance(clip_norm, (int, float)) and not isinstance(clip_norm, bool) and clip_norm == math.inf:
        clip_norm = math.inf
    else:
        clip_norm = check_real(clip_norm, "clip_norm", low=0.0, low_open=True)
    noise_multiplier = check_real(noise_multiplier, "noise_multiplier", low=0.0)
    if math.isinf(clip_norm) and noise_multiplier > 0:
        raise ValueError("`clip_norm` must be finite when `noise_multiplier` > 0 (the noise is sigma * C)")
    if expected_batch_size is not None:
        expected_batch_size = check_real(expected_batch_size, "expected_batch_size", low=0.0, low_open=True)
    elif n == 0:
        raise ValueError("an empty `batch` needs `expected_batch_size` (the divisor of the noisy sum)")
    train, _ = _trainable(model)
    owners = _ghost_owners(model, train) if ghost else None
    first = next(iter(train.values()))
    gen = device_generator(rng, first.device, name="rng", tensor="the model's parameters")
    divisor = float(expected_batch_size) if expected_batch_size is not None else float(n)

    if n > 0 and ghost:
        summed, norms, total = _ghost_clipped(model, loss_fn, batch, n, train, owners, clip_norm)
        loss = total / n
        clip_fraction = float((norms > clip_norm).float().mean())
    elif n > 0:
        grads, losses = _per_sample(model, loss_fn, batch, leaves, spec, n, chunk_size, method)
        # one norm per example over every parameter: the norms of the parameters' slices, then their norm
        per_param = [torch.linalg.vector_norm(g.reshape(n, -1), dim=1) for g in grads.values()]
        norms = torch.linalg.vector_norm(torch.stack([v.to(per_param[0].dtype) for v in per_param]), dim=0)
        factor = (clip_norm / norms).clamp(max=1.0)          # norm 0 -> inf -> 1; C = inf -> 1
        factor = torch.where(torch.isnan(factor), torch.ones_like(factor), factor)
        summed = {k: torch.tensordot(factor.to(g.dtype), g, dims=1) for k, g in grads.items()}
        loss = float(losses.mean())
        clip_fraction = float((norms > clip_norm).float().mean())
    else:
        norms = torch.zeros(0, dtype=first.dtype, device=first.device)
        summed = {k: torch.zeros_like(p) for k, p in train.items()}
        loss, clip_fraction = math.nan, math.nan
    std = noise_multiplier * clip_norm if noise_multiplier > 0 else 0.0
    with torch.no_grad():
        for k, p in train.items():
            g = summed[k]
            if std > 0:
                g = g + std * torch.randn(g.shape, generator=gen, dtype=g.dtype, device=g.device)
            p.grad = (g / divisor).to(p.dtype).detach()
    if optimizer is not None:
        optimizer.step()
    return Result(loss=loss, per_sample_norms=norms.detach(), clip_fraction=clip_fraction, batch_size=n,
                  divisor=divisor, noise_std=std / divisor)


@constraints(n="count", sample_rate="prob", rng="rng", device="any")
def poisson_sample(n: int, sample_rate: float, *, rng: Any = None, device: Any = "cpu") -> "torch.Tensor":
    """Indices of a Poisson-sampled batch: each of ``n`` records is in it independently with probability q.

    This is the sampling :func:`rdp_epsilon` accounts for (Opacus's ``UniformWithReplacementSampler``); the batch
    size is random (Binomial(n, q), possibly 0), so pass ``expected_batch_size=q * n`` to :func:`dp_sgd_step`.

    Parameters
    ----------
    n : int
        The number of records, >= 1.
    sample_rate : float
        q in [0, 1].
    rng : None, int, numpy.random.Generator or torch.Generator, optional
        The source of the draws.
    device : str or torch.device, default "cpu"
        Where the indices go (and where the draws are made).

    Returns
    -------
    torch.Tensor
        The sorted int64 indices of the records in the batch.

    Examples
    --------
    >>> from numtk.torch.privcode import poisson_sample
    >>> idx = poisson_sample(1000, 0.05, rng=0)
    >>> idx.dtype, 20 < idx.numel() < 80
    (torch.int64, True)
    """
    n = check_int(n, "n", minimum=1, maximum=2**40)
    check_size(n, 9.0, "n")   # the float64 draws and the mask
    q = check_real(sample_rate, "sample_rate", low=0.0, high=1.0)
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError):
        raise TypeError(f"`device` must name a torch device; got {device!r}") from None
    gen = device_generator(rng, device, name="rng", tensor="`device`")
    mask = torch.rand(n, generator=gen, device=device, dtype=torch.float64) < q
    return torch.nonzero(mask).reshape(-1)


# --------------------------------------------------------------------------------------------------
# the accountant
# --------------------------------------------------------------------------------------------------
def _orders(orders: Any) -> np.ndarray:
    if orders is None or (isinstance(orders, str) and orders == "integers"):
        return _accounting.DEFAULT_ORDERS
    if isinstance(orders, str):
        if orders == "opacus":
            return _accounting.OPACUS_ORDERS
        raise ValueError(f"`orders` must be None, 'integers', 'opacus' or an array of orders > 1; got {orders!r}")
    try:
        arr = np.asarray(orders)
        if arr.dtype.kind not in "iuf":
            raise TypeError
        arr = arr.astype(np.float64)
    except (TypeError, ValueError):
        raise TypeError("`orders` must be None, 'integers', 'opacus' or a 1-D array of real orders > 1") from None
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"`orders` must be a non-empty 1-D array of orders > 1; got shape {arr.shape}")
    if not np.isfinite(arr).all() or (arr <= 1.0).any():
        raise ValueError("`orders` must hold finite orders > 1")
    if arr.max() > 1e5:
        raise ValueError(f"`orders` must be at most 1e5 (the binomial sum has as many terms); got {arr.max():g}")
    return arr


def _check_accounting(q: Any, noise_multiplier: Any, steps: Any | None, delta: Any | None) -> tuple:
    q = check_real(q, "q", low=0.0, high=1.0)
    sigma = check_real(noise_multiplier, "noise_multiplier", low=0.0, low_open=True)
    if not 1e-3 <= sigma <= 1e6:
        raise ValueError(f"`noise_multiplier` must lie in [1e-3, 1e6] (below, the RDP overflows: no finite epsilon; "
                         f"above, it underflows to 0); got {sigma!r}")
    if steps is not None:
        steps = check_int(steps, "steps", minimum=1, maximum=_MAX_STEPS)
    if delta is not None:
        delta = check_real(delta, "delta", low=0.0, high=1.0, low_open=True, high_open=True)
    return q, sigma, steps, delta


@constraints(q="prob", noise_multiplier="real>0", orders=("option", "array1d"))
def sampled_gaussian_rdp(q: float, noise_multiplier: float, orders: Any = None) -> np.ndarray:
    """Renyi DP of one step of the Poisson-subsampled Gaussian mechanism, per order (Mironov, Talwar, Zhang 2019).

    Integer orders use the binomial sum ``A_a = sum_k C(a, k) (1 - q)^(a-k) q^k exp((k^2 - k) / (2 sigma^2))``,
    fractional orders the paper's two series (Section 3.3); both in log space; the RDP is ``log(A_a) / (a - 1)``.
    Equal to Opacus's ``compute_rdp`` and dp-accounting's ``RdpAccountant`` on the same orders (to rounding and
    their series truncation). Cached per (q, sigma, orders).

    Parameters
    ----------
    q : float
        The Poisson sampling rate in [0, 1].
    noise_multiplier : float
        sigma in [1e-3, 1e6], the noise standard deviation over the clipping norm.
    orders : None, 'integers', 'opacus' or array of float
        The Renyi orders (> 1): None or 'integers' for 2, 3, ..., 256; 'opacus' for Opacus's default grid
        (:data:`OPACUS_ORDERS`).

    Returns
    -------
    numpy.ndarray
        The RDP of one step at each order (read-only; multiply by the number of steps to compose).

    Examples
    --------
    >>> from numtk.torch.privcode import sampled_gaussian_rdp
    >>> r = sampled_gaussian_rdp(1.0, 2.0, [2, 4.5])   # q = 1: the Gaussian mechanism, a / (2 sigma^2)
    >>> [round(float(v), 12) for v in r]
    [0.25, 0.5625]
    """
    q, sigma, _, _ = _check_accounting(q, noise_multiplier, None, None)
    return _accounting.sampled_gaussian_rdp(q, sigma, _orders(orders))


@constraints(q="prob", noise_multiplier="real>0", steps="count", delta="prob_open", orders=("option", "array1d"))
def rdp_epsilon(q: float, noise_multiplier: float, steps: int, delta: float, orders: Any = None) -> float:
    """The epsilon of ``steps`` DP-SGD steps (Poisson sampling rate q, noise multiplier sigma) at the given delta.

    The steps compose in Renyi DP (``steps * sampled_gaussian_rdp(q, sigma, orders)``) and the RDP curve is
    converted to (epsilon, delta)-DP by the improved conversion of Balle et al. (2020), the one Opacus uses:
    ``eps = min_a [rdp(a) - (log delta + log a) / (a - 1) + log((a - 1) / a)]``. What it covers: a record is one
    training example, adjacency is adding or removing one, batches are Poisson-sampled with rate q, every
    step's gradient is the clipped sum with N(0, sigma^2 C^2) noise (:func:`dp_sgd_step`); anything computed from
    the model afterwards is post-processing. It is an upper bound; a privacy-loss-distribution accountant
    (dp-accounting's ``PLDAccountant``) gives a tighter, smaller epsilon for the same run.

    Parameters
    ----------
    q : float
        The sampling rate in [0, 1] (expected batch size over the number of records).
    noise_multiplier : float
        sigma in [1e-3, 1e6].
    steps : int
        The number of steps, >= 1.
    delta : float
        delta in (0, 1).
    orders : None, 'integers', 'opacus' or array of float
        The Renyi orders: None or 'integers' (2 .. 256), 'opacus' (Opacus's default grid, with fractional orders:
        the same or a slightly smaller epsilon), or any orders > 1.

    Returns
    -------
    float
        epsilon >= 0 (``inf`` if no order gives a finite bound).

    Examples
    --------
    >>> from numtk.torch.privcode import rdp_epsilon
    >>> round(rdp_epsilon(0.01, 1.0, 1000, 1e-5), 4)
    2.1078
    >>> round(rdp_epsilon(0.01, 1.0, 1000, 1e-5, orders="opacus"), 4)
    2.1014
    """
    q, sigma, steps, delta = _check_accounting(q, noise_multiplier, steps, delta)
    o = _orders(orders)
    if q == 0.0:  # no record is ever used (the conversion on a finite grid would say a little more than 0)
        return 0.0
    rdp = _accounting.sampled_gaussian_rdp(q, sigma, o) * steps
    return _accounting.rdp_to_epsilon(rdp, o, delta)[0]


@constraints(epsilon="real>0", delta="prob_open", q="prob", steps="count", orders=("option", "array1d"),
             rtol="real>0")
def noise_multiplier_for(epsilon: float, delta: float, q: float, steps: int, *, orders: Any = None,
                         rtol: float = 1e-6) -> float:
    """The smallest noise multiplier whose :func:`rdp_epsilon` is at most ``epsilon`` (bisection).

    epsilon decreases with sigma; the search brackets the answer by doubling and halving, then bisects on
    log sigma until the bracket's relative width is below ``rtol``, and returns its upper end (so the epsilon of
    the result never exceeds the target). Opacus's ``get_noise_multiplier`` does the same with a tolerance on
    epsilon instead.

    Parameters
    ----------
    epsilon : float
        The target epsilon > 0.
    delta : float
        delta in (0, 1).
    q : float
        The sampling rate in (0, 1].
    steps : int
        The number of steps, >= 1.
    orders : None, 'integers', 'opacus' or array of float
        The Renyi orders, as in :func:`rdp_epsilon`.
    rtol : float, default 1e-6
        The relative precision of sigma (at least 1e-12).

    Returns
    -------
    float
        sigma with ``rdp_epsilon(q, sigma, steps, delta, orders) <= epsilon``.

    Raises
    ------
    ValueError
        If no sigma up to 1e6 reaches the target.

    Examples
    --------
    >>> from numtk.torch.privcode import noise_multiplier_for, rdp_epsilon
    >>> sigma = noise_multiplier_for(2.1078, 1e-5, 0.01, 1000)
    >>> round(sigma, 4)
    1.0
    >>> rdp_epsilon(0.01, sigma, 1000, 1e-5) <= 2.1078
    True
    """
    epsilon = check_real(epsilon, "epsilon", low=0.0, low_open=True)
    delta = check_real(delta, "delta", low=0.0, high=1.0, low_open=True, high_open=True)
    q = check_real(q, "q", low=0.0, high=1.0, low_open=True)
    steps = check_int(steps, "steps", minimum=1, maximum=_MAX_STEPS)
    rtol = check_real(rtol, "rtol", low=1e-12)
    o = _orders(orders)

    def eps(sigma: float) -> float:
        return _accounting.rdp_to_epsilon(_accounting.sampled_gaussian_rdp(q, sigma, o) * steps, o, delta)[0]

    lo, hi = 1e-3, 1.0
    while eps(hi) > epsilon:
        lo, hi = hi, hi * 2.0
        if hi > 1e6:
            raise ValueError(f"no noise multiplier up to 1e6 reaches `epsilon` = {epsilon:g} at `delta` = {delta:g} "
                             f"(q = {q:g}, {steps} steps)")
    if lo == 1e-3:
        while hi > 1e-3 and eps(hi / 2.0) <= epsilon:
            hi /= 2.0
        lo = max(hi / 2.0, 1e-3)
        if eps(lo) <= epsilon:
            return lo
    while (hi - lo) > rtol * hi:
        mid = math.sqrt(lo * hi)
        if eps(mid) <= epsilon:
            hi = mid
        else:
            lo = mid
    return hi


# --------------------------------------------------------------------------------------------------
# PrivCode's stage-1 pieces: the KL weight schedule, structural tokens, the syntax-aware KL
# --------------------------------------------------------------------------------------------------
@constraints(t="int>=0", lam_max="real", lam_min="real", alpha="real>=0", every="int>=1")
def lambda_schedule(t: int, lam_max: float = 1000.0, lam_min: float = 0.1, alpha: float = 0.01,
                    every: int = 20) -> float:
    """PrivCode's weight of the syntax-aware KL at step t: a staircase exponential decay.

    ``lambda(t) = lam_min + (lam_max - lam_min) * exp(-alpha * floor(t / every) * every)`` (the authors'
    ``compute_lambda_kl``: constant over blocks of ``every`` steps).

    Parameters
    ----------
    t : int
        The step, >= 0 (at most 1e9).
    lam_max, lam_min : float, default 1000.0, 0.1
        The value at t = 0 and the floor.
    alpha : float, default 0.01
        The decay rate per step, >= 0.
    every : int, default 20
        The length of the staircase's steps (at most 1e9).

    Returns
    -------
    float

    Examples
    --------
    >>> from numtk.torch.privcode import lambda_schedule
    >>> [round(lambda_schedule(t), 4) for t in (0, 19, 20, 100, 500, 1000)]
    [1000.0, 1000.0, 818.7489, 367.9427, 6.8373, 0.1454]
    """
    t = check_int(t, "t", minimum=0, maximum=_MAX_STEPS)
    lam_max = check_real(lam_max, "lam_max")
    lam_min = check_real(lam_min, "lam_min")
    alpha = check_real(alpha, "alpha", low=0.0)
    every = check_int(every, "every", minimum=1, maximum=_MAX_STEPS)
    effective = (t // every) * every
    return lam_min + (lam_max - lam_min) * math.exp(-alpha * effective)


_NEWLINE = re.compile(r"\r\n|\r|\n")


def _line_starts(code: str) -> list[int]:
    """Character offset of the start of each line (1-based lines at index line - 1), as Python's tokenizer
    splits lines (``\\n``, ``\\r\\n``, ``\\r``; not the other characters ``str.splitlines`` breaks at)."""
    return [0] + [m.end() for m in _NEWLINE.finditer(code)]


def _char_offset(code: str, starts: list[int], lineno: int, col_bytes: int) -> int:
    """The character offset of (line, UTF-8 byte column) as ``ast`` reports positions."""
    start = starts[lineno - 1]
    end = starts[lineno] if lineno < len(starts) else len(code)
    line = code[start:end]
    return start + len(line.encode("utf-8")[:col_bytes].decode("utf-8", errors="ignore"))


def _check_offsets(offsets: Any) -> tuple[np.ndarray, Any]:
    """``offsets`` as an (T, 2) int64 array, and the device for the mask."""
    device = None
    if isinstance(offsets, torch.Tensor):
        device = offsets.device
        if offsets.is_floating_point() or offsets.is_complex() or offsets.dtype == torch.bool:
            raise TypeError(f"`offsets` must hold integers; got dtype {offsets.dtype}")
        arr = offsets.detach().cpu().numpy()
    else:
        if isinstance(offsets, (str, bytes)) or not isinstance(offsets, (Sequence, np.ndarray)):
            raise TypeError("`offsets` must be a (T, 2) integer tensor or a sequence of (start, end) pairs; got "
                            f"{type(offsets).__name__}")
        try:
            arr = np.asarray(offsets)
        except (TypeError, ValueError):
            raise TypeError("`offsets` must be a sequence of (start, end) pairs of ints") from None
        if arr.size == 0:
            arr = arr.reshape(0, 2)
        if arr.dtype.kind not in "iu":
            raise TypeError(f"`offsets` must hold integers; got dtype {arr.dtype}")
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise ValueError(f"`offsets` must have shape (T, 2) (a fast tokenizer's offset_mapping); got {arr.shape}")
    if arr.size and ((arr < 0).any() or (arr[:, 1] < arr[:, 0]).any()):
        raise ValueError("`offsets` must hold pairs 0 <= start <= end")
    return arr.astype(np.int64), device


@constraints(code="any", offsets="any", node_types="any", span="option", errors="option")
def structural_token_mask(code: str, offsets: Any, *, node_types: Sequence[str] = STRUCTURAL_NODES,
                          span: str = "node", errors: str = "raise") -> "torch.Tensor":
    """Which tokens of a Python snippet fall in the span of a structural AST node (PrivCode's structural tokens).

    The snippet is parsed with :mod:`ast`; each node whose type is in ``node_types`` gives a character span,
    from its ``(lineno, col_offset)`` to its ``(end_lineno, end_col_offset)`` (``span="node"``: the whole
    statement, body included) or to the start of its body (``span="header"``: ``def f(x):``,
    ``for i in r:``, ``if c:``; trailing white space dropped). ``ast`` reports columns in UTF-8 *bytes*; they
    are converted to characters line by line, so spans are right for non-ASCII source. A token is structural
    when its character interval ``[start, end)`` overlaps a span; empty intervals (special tokens) never are.
    The authors mark every occurrence of a structural token's id anywhere in the sequence (``torch.isin`` on
    ids); this follows the positions instead.

    Parameters
    ----------
    code : str
        The Python source the tokens come from.
    offsets : (T, 2) integer tensor or sequence of (start, end) pairs
        Character offsets of each token in ``code``, as a fast tokenizer's ``offset_mapping`` gives them
        (``tokenizer(code, return_offsets_mapping=True)["offset_mapping"]``).
    node_types : sequence of str, default ('For', 'If', 'While', 'FunctionDef', 'ClassDef')
        Names of :mod:`ast` node classes (``'AsyncFunctionDef'``, ``'With'``, ``'Try'`` ...).
    span : {'node', 'header'}, default 'node'
        The whole node or its header only.
    errors : {'raise', 'ignore'}, default 'raise'
        For code that does not parse: raise a ValueError, or return an all-False mask (generated snippets are
        often truncated).

    Returns
    -------
    torch.Tensor
        A (T,) bool mask, on the device of ``offsets`` when it is a tensor.

    Examples
    --------
    >>> from numtk.torch.privcode import structural_token_mask
    >>> code = "x = 1\\nfor i in y:\\n    x += i\\n"
    >>> offsets = [(0, 1), (2, 3), (4, 5), (6, 9), (10, 11), (12, 14), (15, 16), (16, 17), (22, 23), (24, 26),
    ...            (27, 28)]
    >>> structural_token_mask(code, offsets).tolist()
    [False, False, False, True, True, True, True, True, True, True, True]
    >>> structural_token_mask(code, offsets, span="header").tolist()
    [False, False, False, True, True, True, True, True, False, False, False]
    """
    if not isinstance(code, str):
        raise TypeError(f"`code` must be a str; got {type(code).__name__}")
    arr, device = _check_offsets(offsets)
    if isinstance(node_types, str) or not isinstance(node_types, (Sequence, set, frozenset)):
        raise TypeError("`node_types` must be a sequence of ast node class names")
    types = []
    for name in node_types:
        cls = getattr(ast, name, None) if isinstance(name, str) else None
        if not (isinstance(cls, type) and issubclass(cls, ast.AST)):
            raise ValueError(f"`node_types` must name ast node classes; got {name!r}")
        types.append(cls)
    span = check_option(span, "span", ("node", "header"))
    errors = check_option(errors, "errors", ("raise", "ignore"))
    if arr.size and int(arr[:, 1].max()) > len(code):
        raise ValueError(f"`offsets` reach character {int(arr[:, 1].max())}, past the end of `code` "
                         f"({len(code)} characters)")
    mask = np.zeros(arr.shape[0], dtype=bool)
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError) as e:
        if errors == "raise":
            raise ValueError(f"`code` is not valid Python ({type(e).__name__}: {e}); pass errors='ignore' to get "
                             "an empty mask") from None
        return torch.from_numpy(mask).to(device) if device is not None else torch.from_numpy(mask)
    starts = _line_starts(code)
    spans = []
    for node in ast.walk(tree):
        if not isinstance(node, tuple(types)) or getattr(node, "end_lineno", None) is None:
            continue
        a = _char_offset(code, starts, node.lineno, node.col_offset)
        body = getattr(node, "body", None)
        if span == "header" and isinstance(body, list) and body:
            b = _char_offset(code, starts, body[0].lineno, body[0].col_offset)
            b = a + len(code[a:b].rstrip())
        else:
            b = _char_offset(code, starts, node.end_lineno, node.end_col_offset)
        spans.append((a, b))
    if spans and arr.size:
        s = np.asarray(spans, dtype=np.int64)
        ts, te = arr[:, 0:1], arr[:, 1:2]
        mask = ((ts < s[None, :, 1]) & (te > s[None, :, 0]) & (te > ts)).any(axis=1)
    out = torch.from_numpy(np.ascontiguousarray(mask))
    return out.to(device) if device is not None else out


@constraints(logits_dp="tensor", logits_ref="tensor", mask="any", direction="option", reduction="option")
def syntax_aware_kl(logits_dp: "torch.Tensor", logits_ref: "torch.Tensor", mask: "torch.Tensor", *,
                    direction: str = "ref||dp", reduction: str = "mean") -> "torch.Tensor":
    """The KL divergence between the next-token laws of a DP model and a frozen reference, on masked tokens.

    Per position, with p = softmax(``logits_ref``) and r = softmax(``logits_dp``), ``direction="ref||dp"``
    gives KL(p || r) = sum_v p_v (log p_v - log r_v) (what ``F.kl_div(log r, p)`` computes, the authors'
    call), ``"dp||ref"`` gives KL(r || p). Everything stays in the autograd graph: the gradient with respect to
    ``logits_dp`` is the one the authors' ``compute_kl_loss`` loses by rebuilding the probabilities from
    ``.tolist()``. Computed in float32 at least (log-softmax), returned in the logits' dtype. Pass
    ``logits_ref`` computed under ``torch.no_grad()`` for a frozen teacher. It can be part of the loss of
    :func:`dp_sgd_step` (each example's KL is then clipped with the rest of its gradient): pass the reference
    logits and the mask in the batch, so that each example gets its own rows.

    Parameters
    ----------
    logits_dp, logits_ref : torch.Tensor, shape (..., V)
        Logits of the DP model and of the reference (same shape, dtype and device).
    mask : torch.Tensor, shape (...)
        Bool (which positions count) or floating weights >= 0, the shape of the logits without the last
        dimension (:func:`structural_token_mask` of each sequence, aligned with the logits).
    direction : {'ref||dp', 'dp||ref'}, default 'ref||dp'
    reduction : {'mean', 'sum', 'none'}, default 'mean'
        'mean': the weighted mean over the masked positions (0 when none is); 'sum': their weighted sum;
        'none': the per-position KL times the mask, shape (...).

    Returns
    -------
    torch.Tensor

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.privcode import syntax_aware_kl
    >>> ref = torch.tensor([[0.0, 1.0, 2.0], [1.0, 0.0, 0.0]])
    >>> dp = torch.zeros(2, 3, requires_grad=True)
    >>> kl = syntax_aware_kl(dp, ref, torch.tensor([True, False]))
    >>> kl.backward()
    >>> bool(dp.grad.abs().sum() > 0)
    True
    """
    # inside torch.func transforms (a loss of per_sample_grads / dp_sgd_step) the value checks cannot run
    check_tensor(logits_dp, "logits_dp", finite=not _transformed(logits_dp))
    check_tensor(logits_ref, "logits_ref", finite=not _transformed(logits_ref))
    if logits_dp.ndim < 1:
        raise ValueError("`logits_dp` must have a last (vocabulary) dimension")
    if logits_ref.shape != logits_dp.shape:
        raise ValueError(f"`logits_ref` must have the shape of `logits_dp`, {tuple(logits_dp.shape)}; got "
                         f"{tuple(logits_ref.shape)}")
    if logits_ref.device != logits_dp.device:
        raise ValueError(f"`logits_ref` must be on the device of `logits_dp`, {logits_dp.device}; got "
                         f"{logits_ref.device}")
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"`mask` must be a torch.Tensor (bool or floating weights); got {type(mask).__name__}")
    if tuple(mask.shape) != tuple(logits_dp.shape[:-1]):
        raise ValueError(f"`mask` must have shape {tuple(logits_dp.shape[:-1])} (the logits without their last "
                         f"dimension); got {tuple(mask.shape)}")
    if mask.device != logits_dp.device:
        raise ValueError(f"`mask` must be on the device of `logits_dp`, {logits_dp.device}; got {mask.device}")
    if mask.dtype != torch.bool:
        check_tensor(mask, "mask", finite=not _transformed(mask))
        if mask.numel() and not _transformed(mask) and bool((mask < 0).any()):
            raise ValueError("`mask` weights must be >= 0")
    direction = check_option(direction, "direction", _DIRECTIONS)
    reduction = check_reduction(reduction)
    out_dtype = torch.promote_types(logits_dp.dtype, logits_ref.dtype)
    work = torch.promote_types(out_dtype, torch.float32)
    log_r = torch.log_softmax(logits_dp.to(work), dim=-1)
    log_p = torch.log_softmax(logits_ref.to(work), dim=-1)
    if direction == "ref||dp":
        kl = (log_p.exp() * (log_p - log_r)).sum(-1)
    else:
        kl = (log_r.exp() * (log_r - log_p)).sum(-1)
    w = mask.to(work)
    kl = kl * w
    if reduction == "mean":
        total = w.sum()
        out = kl.sum() / total.clamp_min(torch.finfo(work).tiny) if total.numel() else kl.sum()
        out = torch.where(total > 0, out, kl.sum() * 0.0)
    else:
        out = reduce_loss(kl, reduction)
    return out.to(out_dtype)


# --------------------------------------------------------------------------------------------------
# PrivLC: latent prefixes (reconstructed)
# --------------------------------------------------------------------------------------------------
@constraints(num_codes="count", prefix_len="count", dim="count", init_std="real>0", rng="rng", dtype="any",
             device="any")
class LatentPrefix(torch.nn.Module):
    """K learned soft prefixes, each of m embeddings, prepended to a model's input embeddings (PrivLC,
    **reconstructed**).

    PrivCode++ replaces the private prompt by a learned latent condition so that synthesis never needs the
    sensitive prompts. Reconstructed here from the abstract and prefix tuning: code k is a (m, dim) parameter
    block; an example with code c_i has ``prefixes[c_i]`` prepended to its input embeddings. The prefixes are
    parameters of the model trained *inside the same DP-SGD run* (they are clipped with the rest of each
    example's gradient), so they are covered by that run's epsilon; at synthesis a code is drawn (uniformly,
    or from a differentially private histogram of code usage: :meth:`sample_codes` with ``probs``) and the
    model generates from its prefix alone. How codes are assigned to training examples (a task label, a
    cluster, the code of lowest loss per example) is the caller's choice; a per-example choice stays inside
    that example's clipped contribution.

    Parameters
    ----------
    num_codes : int
        K >= 1.
    prefix_len : int
        m >= 1, the prefix length in embeddings.
    dim : int
        The embedding width.
    init_std : float, default 0.02
        The standard deviation of the normal initialisation.
    rng : None, int, numpy.random.Generator or torch.Generator, optional
        Seeds the initialisation (a CPU generator).
    dtype : torch.dtype, optional
        Default float32.
    device : str or torch.device, optional
        Default CPU.

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.privcode import LatentPrefix
    >>> lp = LatentPrefix(4, 2, 8, rng=0)
    >>> out = lp(torch.zeros(3, 5, 8), torch.tensor([0, 3, 1]))
    >>> out.shape
    torch.Size([3, 7, 8])
    >>> lp.pad(torch.ones(3, 5, dtype=torch.long), 0).shape   # attention masks and labels follow
    torch.Size([3, 7])
    """

    def __init__(self, num_codes: int, prefix_len: int, dim: int, *, init_std: float = 0.02, rng: Any = None,
                 dtype: Any = None, device: Any = None) -> None:
        super().__init__()
        self.num_codes = check_int(num_codes, "num_codes", minimum=1, maximum=2**20)
        self.prefix_len = check_int(prefix_len, "prefix_len", minimum=1, maximum=2**16)
        self.dim = check_int(dim, "dim", minimum=1, maximum=2**20)
        if self.num_codes * self.prefix_len * self.dim > 2**28:
            raise ValueError("`num_codes` * `prefix_len` * `dim` must be at most 2**28 parameters")
        init_std = check_real(init_std, "init_std", low=0.0, low_open=True)
        if dtype is None:
            dtype = torch.float32
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            raise TypeError(f"`dtype` must be a floating torch.dtype; got {dtype!r}")
        try:
            device = torch.device("cpu" if device is None else device)
        except (RuntimeError, TypeError):
            raise TypeError(f"`device` must name a torch device; got {device!r}") from None
        gen = torch_generator(rng)
        w = torch.randn(self.num_codes, self.prefix_len, self.dim, generator=gen, dtype=torch.float64) * init_std
        self.prefixes = torch.nn.Parameter(w.to(dtype=dtype, device=device))

    def _check_codes(self, codes: Any, n: int | None = None) -> "torch.Tensor":
        if not isinstance(codes, torch.Tensor):
            raise TypeError(f"`codes` must be an integer torch.Tensor; got {type(codes).__name__}")
        if codes.is_floating_point() or codes.is_complex() or codes.dtype == torch.bool:
            raise TypeError(f"`codes` must hold integers; got dtype {codes.dtype}")
        if codes.ndim != 1 or (n is not None and codes.shape[0] != n):
            raise ValueError(f"`codes` must have shape ({'B' if n is None else n},) (one code per example); got "
                             f"{tuple(codes.shape)}")
        if codes.numel() and not _transformed(codes) and (int(codes.min()) < 0 or int(codes.max()) >= self.num_codes):
            raise ValueError(f"`codes` must lie in [0, {self.num_codes})")
        return codes

    @constraints(inputs_embeds="tensor", codes="any")
    def forward(self, inputs_embeds: "torch.Tensor", codes: "torch.Tensor") -> "torch.Tensor":
        """Prepend each example's prefix: (B, T, dim) embeddings and (B,) codes -> (B, m + T, dim).

        The prefix is cast to the embeddings' dtype and must be on their device.
        """
        check_tensor(inputs_embeds, "inputs_embeds", ndim=3, finite=not _transformed(inputs_embeds))
        if inputs_embeds.shape[-1] != self.dim:
            raise ValueError(f"`inputs_embeds` must have last dimension {self.dim}; got {inputs_embeds.shape[-1]}")
        if inputs_embeds.device != self.prefixes.device:
            raise ValueError(f"`inputs_embeds` must be on the prefixes' device, {self.prefixes.device}; got "
                             f"{inputs_embeds.device}")
        codes = self._check_codes(codes, inputs_embeds.shape[0]).to(self.prefixes.device)
        pre = self.prefixes[codes].to(inputs_embeds.dtype)
        return torch.cat([pre, inputs_embeds], dim=1)

    @constraints(x="any", value="real")
    def pad(self, x: "torch.Tensor", value: Any = 0) -> "torch.Tensor":
        """Prepend m columns of ``value`` to a (B, T) tensor: 1 for an attention mask, -100 for labels."""
        if not isinstance(x, torch.Tensor) or x.ndim != 2:
            raise TypeError("`x` must be a 2-D torch.Tensor (B, T)") if not isinstance(x, torch.Tensor) else \
                ValueError(f"`x` must be 2-D (B, T); got shape {tuple(x.shape)}")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"`value` must be a finite int or float; got {value!r}")
        if not math.isfinite(value):
            raise ValueError(f"`value` must be finite; got {value!r}")
        if not x.is_floating_point():
            info = torch.iinfo(x.dtype) if x.dtype != torch.bool else None
            if info is None or value != int(value) or not info.min <= value <= info.max:
                raise ValueError(f"`value` must be representable in `x`'s dtype {x.dtype}; got {value!r}")
            value = int(value)
        cols = torch.full((x.shape[0], self.prefix_len), value, dtype=x.dtype, device=x.device)
        return torch.cat([cols, x], dim=1)

    @constraints(n="count", probs="tensor", rng="rng")
    def sample_codes(self, n: int, *, probs: Any = None, rng: Any = None) -> "torch.Tensor":
        """n codes for synthesis, uniform or with probabilities ``probs`` (K,) (e.g. a noisy histogram of code
        usage, normalised; negative entries of a noisy histogram must be clipped first)."""
        n = check_int(n, "n", minimum=1, maximum=2**31 - 1)
        if probs is None:
            p = torch.full((self.num_codes,), 1.0 / self.num_codes, dtype=torch.float64)
        else:
            check_tensor(probs, "probs", shape=(self.num_codes,))
            if bool((probs < 0).any()) or float(probs.sum()) <= 0:
                raise ValueError("`probs` must be >= 0 with a positive sum")
            p = probs.detach().to("cpu", torch.float64)
        gen = torch_generator(rng)
        return torch.multinomial(p, n, replacement=True, generator=gen).to(self.prefixes.device)


# --------------------------------------------------------------------------------------------------
# canary exposure
# --------------------------------------------------------------------------------------------------
@constraints(log_likelihoods="tensor", canary="index")
def canary_exposure(log_likelihoods: Any, canary: int) -> Result:
    """The exposure of an inserted canary (Carlini et al., "The Secret Sharer", 2019), by exact enumeration.

    All candidates of the canary's format (e.g. every 4-digit secret in ``"key = '####'"``: ``|R|`` = 10^4) are
    scored by the model's log-likelihood; the canary's rank is 1 + the number of candidates scored strictly
    higher (ties count in the canary's favour: the rank a guesser enumerating by likelihood would need at
    best), and ``exposure = log2 |R| - log2 rank``. Between 0 (the canary is the least likely) and log2 ``|R|``
    (it is the most likely); a model that learned nothing about the secret gives log2 ``|R|`` - log2 of a uniform
    rank, about 1 bit on average.

    Parameters
    ----------
    log_likelihoods : torch.Tensor or numpy.ndarray, shape (R,)
        The model's log-likelihood of every candidate (finite; floating).
    canary : int
        The index of the inserted canary among them (negative counts from the end).

    Returns
    -------
    Result
        exposure : float
            In bits.
        rank : int
            The canary's rank, 1 = most likely.
        n_candidates : int
            ``|R|``.

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.privcode import canary_exposure
    >>> ll = torch.tensor([-3.0, -1.0, -2.0, -5.0])
    >>> canary_exposure(ll, 1).exposure     # the most likely of 4: log2(4) - log2(1)
    2.0
    >>> canary_exposure(ll, 2).rank
    2
    """
    if isinstance(log_likelihoods, np.ndarray):
        if log_likelihoods.dtype.kind != "f":
            raise TypeError(f"`log_likelihoods` must hold floating-point numbers; got dtype {log_likelihoods.dtype}")
        log_likelihoods = torch.from_numpy(np.ascontiguousarray(log_likelihoods))
    check_tensor(log_likelihoods, "log_likelihoods", ndim=1)
    n = int(log_likelihoods.shape[0])
    if n < 1:
        raise ValueError("`log_likelihoods` must hold at least one candidate")
    if isinstance(canary, bool) or not isinstance(canary, (int, np.integer)):
        raise TypeError(f"`canary` must be an int index; got {type(canary).__name__}")
    canary = int(canary)
    if not -n <= canary < n:
        raise ValueError(f"`canary` must index one of the {n} candidates; got {canary}")
    ll = log_likelihoods.detach()
    rank = 1 + int((ll > ll[canary]).sum())
    return Result(exposure=math.log2(n) - math.log2(rank), rank=rank, n_candidates=n)
