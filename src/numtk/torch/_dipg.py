"""DiP-G: discrete graph prompts learned as hard k-sparse edge masks with the perturbed top-k and I-MLE.

Pieces, each usable on its own:

- :func:`topk_mask`: the exact top-k MAP solver, k-hot along the last dimension, ties to the lower position;
- :func:`sum_of_gamma_noise`: the sum-of-Gamma perturbation of I-MLE for top-k (Niepert et al., 2021);
- :func:`imle_topk`: the perturbed top-k in the forward and the I-MLE gradient in the backward, with the
  forward's noise reused in the backward's target solve;
- :func:`screened_topk`: top-k with an active-set screening by bounds on the values (reconstructed; exact by
  construction);
- :func:`candidate_edges`: the multi-hop subgraph of a target node and its candidate prompt edges;
- :class:`GCN`: a two-layer graph convolutional network in plain torch (symmetric normalisation with self loops,
  edge weights);
- :class:`DiscreteGraphPrompt`: a frozen GNN adapted by adding k edges per target, chosen by a scored, hard
  top-k (I-MLE in training, the deterministic top-k of the scores in evaluation), and a linear head.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

from numtk._lib import Result
from numtk._lib._constraints import constraints
from numtk._lib._validation import check_bool, check_int, check_option, check_real, check_size
from numtk.torch._common import check_same_device, check_tensor, device_generator, standard_gamma, torch

__all__ = ["topk_mask", "sum_of_gamma_noise", "imle_topk", "screened_topk", "candidate_edges", "GCN",
           "DiscreteGraphPrompt"]

#: the most sum-of-Gamma terms and I-MLE samples accepted (each sizes a loop or an output)
_MAX_ITER = 10**6
_MAX_SAMPLES = 2**20
#: the largest k of the noise and the prompt (a top-k over more items than the C int range is not meant)
_MAX_K = 2**31 - 1
#: bytes per element of a sum-of-Gamma sample: three float64 temporaries and the output
_GAMMA_BYTES = 32.0
#: DiscreteGraphPrompt's training-time masks
_MODES = ("imle", "sigmoid", "gumbel_sigmoid")


# --------------------------------------------------------------------------------------------------
# argument helpers
# --------------------------------------------------------------------------------------------------
def _check_scores(scores: Any, name: str, *, allow_int: bool = True) -> "torch.Tensor":
    """A tensor of at least one dimension, real (floating, or integer where allowed), without NaN."""
    if not isinstance(scores, torch.Tensor):
        raise TypeError(f"`{name}` must be a torch.Tensor; got {type(scores).__name__}")
    if scores.dtype == torch.bool or scores.is_complex() or (not allow_int and not scores.is_floating_point()):
        kind = "floating-point or integer numbers" if allow_int else "floating-point numbers"
        raise TypeError(f"`{name}` must hold {kind}; got dtype {scores.dtype}")
    if scores.ndim < 1:
        raise ValueError(f"`{name}` must have at least one dimension (the items are along the last); got a 0-D "
                         "tensor")
    if scores.is_floating_point() and scores.numel() and bool(torch.isnan(scores).any()):
        raise ValueError(f"`{name}` holds NaN (top-k of NaN is not defined)")
    return scores


def _check_k(k: Any, m: int, name: str = "k") -> int:
    return check_int(k, name, minimum=0, maximum=m)


def _topk(scores: "torch.Tensor", k: int) -> "torch.Tensor":
    """The k-hot mask of the k largest entries along the last dim, ties to the lower position (no checks).

    ``torch.topk`` gives the k-th largest value ``v``; every entry above ``v`` is in, and of the entries equal
    to ``v`` the first ``k - #{> v}`` by position. O(m) besides the top-k itself.
    """
    m = scores.shape[-1]
    if k == 0 or m == 0:
        return torch.zeros_like(scores)
    if k == m:
        return torch.ones_like(scores)
    vals, idx = torch.topk(scores, k, dim=-1, largest=True, sorted=False)
    kth = vals.min(dim=-1, keepdim=True).values
    tied = scores == kth
    if bool((tied.sum(dim=-1, keepdim=True) == (vals == kth).sum(dim=-1, keepdim=True)).all()):
        # no row has an entry equal to its k-th value left out: torch.topk's set is the answer
        return torch.zeros_like(scores).scatter_(-1, idx, 1)
    above = scores > kth
    need = k - above.sum(dim=-1, keepdim=True)
    take = tied & (torch.cumsum(tied, dim=-1) <= need)
    return (above | take).to(scores.dtype)


# --------------------------------------------------------------------------------------------------
# the top-k solver and the noise
# --------------------------------------------------------------------------------------------------
@constraints(scores="tensor", k="int>=0")
def topk_mask(scores: "torch.Tensor", k: int) -> "torch.Tensor":
    """The exact top-k solver: a k-hot mask of the k largest scores along the last dimension.

    Parameters
    ----------
    scores : torch.Tensor, shape ``(..., m)``
        The scores; leading dimensions are a batch. Floating or integer dtypes; ``+-inf`` are allowed
        (``-inf`` excludes an item unless fewer than k others remain), NaN is refused.
    k : int
        How many items to pick per row, ``0 <= k <= m``.

    Returns
    -------
    torch.Tensor
        The mask, of the shape, dtype and device of ``scores``: exactly ``k`` ones per row, at the ``k`` largest
        scores; among equal scores the lower position wins (deterministic, as a stable descending sort).

    Raises
    ------
    ValueError
        If ``scores`` holds NaN or is 0-D, or ``k`` is outside ``[0, m]``.

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.dipg import topk_mask
    >>> topk_mask(torch.tensor([0.5, 2.0, 1.0, 2.0]), 2)
    tensor([0., 1., 0., 1.])
    >>> topk_mask(torch.tensor([[1, 1, 1], [3, 2, 1]]), 2)  # ties: the lower position wins
    tensor([[1, 1, 0],
            [1, 1, 0]])
    """
    scores = _check_scores(scores, "scores")
    k = _check_k(k, scores.shape[-1])
    return _topk(scores, k)


def _gamma_sum(shape: tuple, k: float, n_iter: int, gen: "torch.Generator", dtype: "torch.dtype",
               device: "torch.device") -> "torch.Tensor":
    # Gamma(shape 1/k, rate i/k) = Gamma(1/k, 1) * k / i; sampled in float64 with the generator
    total = torch.zeros(shape, dtype=torch.float64, device=device)
    for i in range(1, n_iter + 1):
        total += standard_gamma(1.0 / k, shape, gen, dtype=torch.float64, device=device) * (k / i)
    return ((total - math.log(n_iter)) / k).to(dtype)


def _check_shape(shape: Any) -> tuple:
    if isinstance(shape, numbers.Integral) and not isinstance(shape, bool):
        shape = (shape,)
    if isinstance(shape, torch.Size):
        shape = tuple(shape)
    if not isinstance(shape, (tuple, list)):
        raise TypeError(f"`shape` must be an int or a tuple of ints; got {type(shape).__name__}")
    out = tuple(check_int(s, "shape", minimum=0) for s in shape)
    check_size(math.prod(out), _GAMMA_BYTES, "shape")
    return out


def _dtype(dtype: Any) -> "torch.dtype":
    if dtype is None:
        return torch.get_default_dtype()
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"`dtype` must be a floating torch.dtype or None; got {dtype!r}")
    return dtype


@constraints(shape="any", k="int>=1", n_iter="count", rng="rng", dtype="option", device="any")
def sum_of_gamma_noise(shape: Any, k: int, n_iter: int = 10, *, rng: Any = None, dtype: Any = None,
                       device: Any = None) -> "torch.Tensor":
    """Sum-of-Gamma noise for the perturbed top-k: ``eps = (sum_{i=1}^s G_i - log s) / k``.

    ``G_i ~ Gamma(shape 1/k, rate i/k)`` independent, ``s = n_iter``, as in the I-MLE code (torch-imle's
    ``SumOfGammaNoiseDistribution``): the noise whose sum over k items approximates a Gumbel, so that the
    perturbed top-k samples approximately from the k-subset distribution. Mean ``(H_s - ln s)/k``, variance
    ``sum_{i<=s} i^-2 / k`` (``H_s`` the harmonic number).

    Parameters
    ----------
    shape : int or tuple of int
        The shape of the sample (``shape`` is not checked by the constraint vocabulary; ints >= 0).
    k : int
        The k of the top-k the noise perturbs, ``>= 1``.
    n_iter : int
        The number ``s`` of Gamma terms, ``>= 1`` (at most 10**6).
    rng : None, int, numpy.random.Generator or torch.Generator
        The randomness.
    dtype : torch.dtype, optional
        A floating dtype (default: torch's default dtype). The sum is accumulated in float64.
    device : torch.device or str, optional
        Where to sample (default: the CPU, or the generator's device).

    Returns
    -------
    torch.Tensor
        The noise, of ``shape``.

    Examples
    --------
    >>> from numtk.torch.dipg import sum_of_gamma_noise
    >>> eps = sum_of_gamma_noise((100_000,), 5, rng=0, dtype=torch.float64)
    >>> round(eps.mean().item(), 2), round(eps.var().item(), 2)  # (H_10 - ln 10)/5, (sum i^-2)/5
    (0.13, 0.31)
    """
    shape = _check_shape(shape)
    k = check_int(k, "k", minimum=1, maximum=_MAX_K)
    n_iter = check_int(n_iter, "n_iter", minimum=1, maximum=_MAX_ITER)
    dtype = _dtype(dtype)
    if device is None:
        device = rng.device if isinstance(rng, torch.Generator) else torch.device("cpu")
    else:
        try:
            device = torch.device(device)
        except (TypeError, RuntimeError):
            raise TypeError(f"`device` must be a torch.device or a device string; got {device!r}") from None
    gen = device_generator(rng, device)
    return _gamma_sum(shape, float(k), n_iter, gen, dtype, device)


# --------------------------------------------------------------------------------------------------
# I-MLE
# --------------------------------------------------------------------------------------------------
class _IMLETopK(torch.autograd.Function):
    """z = topk(theta + eps) per sample; backward: mean over samples of topk(theta + eps) - topk(theta' + eps),
    theta' = theta - lam * dL/dz, with the forward's eps."""

    @staticmethod
    def forward(ctx, theta, eps, k, lam):  # noqa: D401 - autograd signature
        z = _topk(theta.unsqueeze(0) + eps, k)
        ctx.save_for_backward(theta, eps, z)
        ctx.k, ctx.lam = k, lam
        return z

    @staticmethod
    def backward(ctx, grad_z):
        theta, eps, z = ctx.saved_tensors
        target = theta.unsqueeze(0) - ctx.lam * grad_z
        z_target = _topk(target + eps, ctx.k)
        return (z - z_target).mean(dim=0), None, None, None


def _imle(theta: "torch.Tensor", k: int, lam: float, eps: "torch.Tensor") -> "torch.Tensor":
    """The I-MLE top-k on ``eps`` of shape (S, *theta.shape) (no checks); returns (S, *theta.shape)."""
    return _IMLETopK.apply(theta, eps, k, lam)


@constraints(theta="tensor", k="int>=0", lam="real>=0", n_samples="count", noise_temperature="real>=0",
             rng="rng")
def imle_topk(theta: "torch.Tensor", k: int, *, lam: float = 10.0, n_samples: int = 1,
              noise_temperature: float = 1.0, rng: Any = None) -> "torch.Tensor":
    """The perturbed top-k with the I-MLE gradient (Niepert, Minervini and Franceschi, NeurIPS 2021).

    Forward: ``z_s = topk(theta + tau * eps_s)`` for ``s = 1..n_samples``, ``eps_s`` sum-of-Gamma noise
    (:func:`sum_of_gamma_noise` with this ``k``), ``tau = noise_temperature``. Backward, given ``g_s = dL/dz_s``:
    the target ``theta'_s = theta - lam * g_s`` is solved with the *same* noise and the gradient is

    ``dL/dtheta = mean_s [ topk(theta + tau eps_s) - topk(theta'_s + tau eps_s) ]``

    (no division by ``lam``, as in the I-MLE code). The gradient is zero when ``lam * g`` does not change the
    top-k set: ``lam`` is a real hyperparameter. A :class:`torch.autograd.Function` underneath.

    With ``n_samples = S > 1`` and a loss that averages the samples, each ``g_s`` carries a factor ``1/S``, so
    the target step per sample is effectively ``lam / S`` (as in torch-imle); scale ``lam`` with ``S`` to keep
    it.

    Parameters
    ----------
    theta : torch.Tensor, shape ``(..., m)``
        Finite floating scores; leading dimensions are a batch.
    k : int
        Items per row, ``0 <= k <= m``.
    lam : float
        The step ``lam >= 0`` of the target distribution.
    n_samples : int
        Noise samples, ``>= 1``.
    noise_temperature : float
        ``tau >= 0``; 0 gives the plain top-k in the forward.
    rng : None, int, numpy.random.Generator or torch.Generator
        The noise's randomness (a generator on ``theta``'s device).

    Returns
    -------
    torch.Tensor
        The k-hot samples: shape of ``theta`` when ``n_samples == 1``, else ``(n_samples, *theta.shape)`` (one
        sample per leading index; the loss may use them as it likes, e.g. averaged).

    Examples
    --------
    >>> from numtk.torch.dipg import imle_topk
    >>> theta = torch.tensor([0.1, 2.0, -1.0, 1.5], requires_grad=True)
    >>> z = imle_topk(theta, 2, noise_temperature=0.0)
    >>> z
    tensor([0., 1., 0., 1.], grad_fn=<SqueezeBackward1>)
    >>> (z * torch.tensor([0.0, 1.0, 0.0, 0.0])).sum().backward()  # item 1 is costly: swap it out
    >>> theta.grad
    tensor([-1.,  1.,  0.,  0.])
    """
    theta = check_tensor(theta, "theta")
    if theta.ndim < 1:
        raise ValueError("`theta` must have at least one dimension (the items are along the last); got a 0-D "
                         "tensor")
    k = _check_k(k, theta.shape[-1])
    lam = check_real(lam, "lam", low=0.0)
    n_samples = check_int(n_samples, "n_samples", minimum=1, maximum=_MAX_SAMPLES)
    tau = check_real(noise_temperature, "noise_temperature", low=0.0)
    gen = device_generator(rng, theta.device)
    shape = (n_samples, *theta.shape)
    # the noise, the samples and the backward's target solve: a few float64 and theta-sized tensors each
    check_size(n_samples * theta.numel(), _GAMMA_BYTES + 4 * theta.element_size(), "n_samples")
    if tau == 0.0 or k == 0 or theta.numel() == 0:
        eps = torch.zeros(shape, dtype=theta.dtype, device=theta.device)
    else:
        eps = tau * _gamma_sum(shape, float(k), 10, gen, theta.dtype, theta.device)
    z = _imle(theta, k, lam, eps)
    return z.squeeze(0) if n_samples == 1 else z


# --------------------------------------------------------------------------------------------------
# screening
# --------------------------------------------------------------------------------------------------
@constraints(values="tensor", k="int>=0", lower="tensor", upper="tensor", threshold=("tensor", "real"))
def screened_topk(values: "torch.Tensor", k: int, lower: "torch.Tensor", upper: "torch.Tensor", *,
                  threshold: Any = None) -> Result:
    """Top-k with an active-set screening by bounds ``lower <= values <= upper`` (reconstructed).

    The screening rule (reconstructed from the DiP-G abstract; the paper's exact rule is not public): let ``t``
    be the k-th largest lower bound. Every item with ``upper_i < t`` is beaten strictly by ``k`` items
    (``values_j >= lower_j >= t > upper_i >= values_i``), so it is not in the top-k: drop it, and solve the top-k
    exactly on the remaining *active* set. The result equals :func:`topk_mask` ``(values, k)`` exactly, ties
    included (a dropped item never ties with a kept winner, and the active set keeps the positional order). In
    I-MLE's target solve ``values = theta + eps - lam * g`` with ``|g_i| <= G`` gives the bounds
    ``theta + eps -+ lam * G``, which tighten as ``lam -> 0``.

    Where a bound does not hold (``lower_i > values_i`` or ``upper_i < values_i``) it is widened to ``values_i``
    (counted in ``widened``); so the active set always holds at least k items and the result stays exact.

    Parameters
    ----------
    values : torch.Tensor, shape ``(..., m)``
        The exact scores (finite floating); leading dimensions are a batch.
    k : int
        Items per row, ``0 <= k <= m``.
    lower, upper : torch.Tensor
        Bounds of the shape of ``values`` with ``lower <= upper``.
    threshold : torch.Tensor or float, optional
        A known value ``<=`` the k-th largest lower bound of each row (shape ``(...)`` or ``(..., 1)``, or a
        float), e.g. the forward solve's k-th value less ``lam * G``: it spares the top-k of ``lower``. None: it
        is computed. A larger value than allowed is detected and replaced (counted in ``widened``).

    Returns
    -------
    Result
        mask : torch.Tensor
            The k-hot top-k of ``values`` (its shape and dtype), equal to ``topk_mask(values, k)``.
        active : torch.Tensor
            bool, shape of ``values``: the active set on which the top-k was solved.
        n_active : torch.Tensor
            int64, shape ``values.shape[:-1]``: the active items per row (at least k).
        fraction : float
            The active items over all items (0.0 for no items).
        widened : int
            Bound entries widened to the value, plus rows whose given ``threshold`` was replaced.

    Examples
    --------
    >>> from numtk.torch.dipg import screened_topk
    >>> v = torch.tensor([0.0, 5.0, 1.0, 4.0, 3.0, -2.0])
    >>> r = screened_topk(v, 2, v - 0.5, v + 0.5)  # the 2nd largest lower bound is 3.5: items 0, 2, 5 drop
    >>> r.mask
    tensor([0., 1., 0., 1., 0., 0.])
    >>> r.active, r.fraction
    (tensor([False,  True, False,  True,  True, False]), 0.5)
    """
    values = check_tensor(values, "values")
    if values.ndim < 1:
        raise ValueError("`values` must have at least one dimension (the items are along the last); got a 0-D "
                         "tensor")
    m = values.shape[-1]
    k = _check_k(k, m)
    for name, b in (("lower", lower), ("upper", upper)):
        check_tensor(b, name)
        if b.shape != values.shape:
            raise ValueError(f"`{name}` must have the shape of `values`, {tuple(values.shape)}; got {tuple(b.shape)}")
        if b.device != values.device:
            raise ValueError(f"`{name}` must be on the device of `values`, {values.device}; got {b.device}")
    lower = lower.to(values.dtype)
    upper = upper.to(values.dtype)
    batch = values.shape[:-1]
    if threshold is not None:
        if isinstance(threshold, torch.Tensor):
            check_tensor(threshold, "threshold")
            if threshold.shape not in (batch, (*batch, 1)) and threshold.numel() != 1:
                raise ValueError(f"`threshold` must have shape {tuple(batch)} or {(*batch, 1)} (one per row); "
                                 f"got {tuple(threshold.shape)}")
            threshold = threshold.to(device=values.device, dtype=values.dtype).reshape(
                (*batch, 1) if threshold.numel() != 1 else (1,) * values.ndim)
        else:
            threshold = torch.tensor(check_real(threshold, "threshold"), dtype=values.dtype,
                                     device=values.device).reshape((1,) * values.ndim)
    widened = 0
    bad_lo = lower > values
    bad_hi = upper < values
    n_bad = int(bad_lo.sum()) + int(bad_hi.sum())
    if n_bad:
        # lower <= values <= upper everywhere implies lower <= upper: checked only where a bound fails
        if bool((lower > upper).any()):
            raise ValueError("`lower` must be <= `upper` everywhere")
        widened += n_bad
        lower = torch.where(bad_lo, values, lower)
        upper = torch.where(bad_hi, values, upper)
    if k == 0 or values.numel() == 0:
        active = torch.zeros(values.shape, dtype=torch.bool, device=values.device)
        mask = torch.zeros_like(values)
    else:
        kth = torch.topk(lower, k, dim=-1).values.min(dim=-1, keepdim=True).values if threshold is None else None
        if threshold is not None:
            # a given threshold must not exceed the k-th largest lower bound: rows with fewer than k lower
            # bounds at or above it fall back to the computed one
            ok = (lower >= threshold).sum(dim=-1, keepdim=True) >= k
            if not bool(ok.all()):
                widened += int((~ok).sum())
                kth_c = torch.topk(lower, k, dim=-1).values.min(dim=-1, keepdim=True).values
                kth = torch.where(ok, threshold.expand_as(kth_c), kth_c)
            else:
                kth = threshold
        active = upper >= kth
        mask = _masked_topk(values, active, k)
    n_active = active.sum(dim=-1)
    fraction = float(n_active.sum()) / max(values.numel(), 1)
    return Result(mask=mask, active=active, n_active=n_active, fraction=fraction, widened=widened)


def _masked_topk(values: "torch.Tensor", active: "torch.Tensor", k: int) -> "torch.Tensor":
    """The top-k of ``values`` restricted to ``active`` (which holds the top-k and >= k items per row)."""
    shape = values.shape
    m = shape[-1]
    flat_v = values.reshape(-1, m)
    flat_a = active.reshape(-1, m)
    counts = flat_a.sum(dim=1)
    width = int(counts.max())
    if width >= m // 2:  # screening removed little: solve in place
        return _topk(torch.where(flat_a, flat_v, torch.full_like(flat_v, -math.inf)), k).reshape(shape)
    # gather each row's active items (in positional order) into a (rows, width) block padded with -inf
    rows, cols = flat_a.nonzero(as_tuple=True)
    starts = torch.cumsum(counts, 0) - counts
    slot = torch.arange(rows.numel(), device=values.device) - starts[rows]
    block = torch.full((flat_v.shape[0], width), -math.inf, dtype=values.dtype, device=values.device)
    block[rows, slot] = flat_v[rows, cols]
    sub = _topk(block, k)
    out = torch.zeros_like(flat_v)
    out[rows, cols] = sub[rows, slot]
    return out.reshape(shape)


# --------------------------------------------------------------------------------------------------
# graphs
# --------------------------------------------------------------------------------------------------
def _check_edges(edges: Any, num_nodes: int, name: str = "edges", nodes_of: str | None = None) -> "torch.Tensor":
    if not isinstance(edges, torch.Tensor):
        raise TypeError(f"`{name}` must be a torch.Tensor of shape (2, E); got {type(edges).__name__}")
    if edges.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"`{name}` must hold int32 or int64 node ids; got dtype {edges.dtype}")
    if edges.ndim != 2 or edges.shape[0] != 2:
        raise ValueError(f"`{name}` must have shape (2, E) (sources, destinations); got {tuple(edges.shape)}")
    if edges.numel() and (int(edges.min()) < 0 or int(edges.max()) >= num_nodes):
        of = "" if not nodes_of else (" (`num_nodes`)" if nodes_of == "num_nodes" else f" (the rows of `{nodes_of}`)")
        raise ValueError(f"`{name}` must hold node ids in [0, {num_nodes}){of}; got ids in "
                         f"[{int(edges.min())}, {int(edges.max())}]")
    return edges.long()


def _check_num_nodes(num_nodes: Any) -> int:
    # a bound on the ids only: the tables are sized by the ids that occur (see candidate_edges)
    return check_int(num_nodes, "num_nodes", minimum=1)


def _csr(src: "torch.Tensor", dst: "torch.Tensor", num_nodes: int):
    """(row pointers, destinations, edge positions) of the edges ``src -> dst`` grouped by source."""
    order = torch.argsort(src, stable=True)
    ptr = torch.zeros(num_nodes + 1, dtype=torch.long, device=src.device)
    ptr[1:] = torch.cumsum(torch.bincount(src, minlength=num_nodes), 0)
    return ptr, dst[order], order


def _expand(ptr: "torch.Tensor", nodes: "torch.Tensor"):
    """For each node, the positions ``ptr[v] .. ptr[v + 1] - 1``: (index of the node, position)."""
    deg = ptr[nodes + 1] - ptr[nodes]
    which = torch.repeat_interleave(torch.arange(nodes.numel(), device=nodes.device), deg)
    first = torch.cumsum(deg, 0) - deg
    pos = ptr[nodes][which] + torch.arange(which.numel(), device=nodes.device) - first[which]
    return which, pos


def _reach(edges: "torch.Tensor", num_nodes: int, targets: "torch.Tensor", hops: int) -> "torch.Tensor":
    """The sorted keys ``row * num_nodes + node`` of the nodes within ``hops`` of each target (row = its
    position in ``targets``), edges followed both ways; a breadth-first search from every target at once."""
    dev = targets.device
    keys = torch.unique(torch.arange(targets.numel(), device=dev) * num_nodes + targets)
    if edges.numel() == 0 or targets.numel() == 0:
        return keys
    ptr, nbr, _ = _csr(torch.cat([edges[0], edges[1]]), torch.cat([edges[1], edges[0]]), num_nodes)
    frontier = keys
    for _ in range(hops):
        which, pos = _expand(ptr, frontier % num_nodes)
        reached = torch.unique((frontier // num_nodes)[which] * num_nodes + nbr[pos])
        fresh = reached[~torch.isin(reached, keys)]
        if fresh.numel() == 0:
            break
        keys = torch.sort(torch.cat([keys, fresh])).values
        frontier = fresh
    return keys


def _induced(edges: "torch.Tensor", num_nodes: int, keys: "torch.Tensor"):
    """The edges of each row's subgraph: (position in ``keys`` of the source, of the destination, edge id)."""
    ptr, dst, order = _csr(edges[0], edges[1], num_nodes)
    which, pos = _expand(ptr, keys % num_nodes)
    rows = keys // num_nodes
    dkey = rows[which] * num_nodes + dst[pos]
    inside = torch.isin(dkey, keys)
    which, dkey, eid = which[inside], dkey[inside], order[pos[inside]]
    return which, torch.searchsorted(keys, dkey), eid


@constraints(edges="tensor", num_nodes="cap", target="int>=0", hops="cap")
def candidate_edges(edges: "torch.Tensor", num_nodes: int, target: int, hops: int = 2) -> Result:
    """The ``hops``-hop subgraph of ``target`` and its candidate prompt edges ``target <-> node``.

    Parameters
    ----------
    edges : torch.Tensor, shape ``(2, E)``
        Edges as (source, destination) rows of int32 or int64 node ids in ``[0, num_nodes)``; the subgraph
        follows them both ways (an undirected graph may list each edge once or twice).
    num_nodes : int
        The number of nodes, ``>= 1``: a bound on the ids only (the work and memory are ``O(E)``, the node
        ids that occur are relabelled), so a sparse id space of any size is fine.
    target : int
        The target node, ``0 <= target < num_nodes``.
    hops : int
        The radius, ``>= 1`` (a bound: the search stops when no new node is reached).

    Returns
    -------
    Result
        nodes : torch.Tensor
            int64, sorted: the subgraph's nodes, the target included.
        candidates : torch.Tensor
            int64, shape ``(2, C)``: row 0 the target, row 1 each other subgraph node, in node order.
        subgraph_edges : torch.Tensor
            int64, shape ``(2, E')``: the columns of ``edges`` with both ends in the subgraph, in their order.

    Examples
    --------
    >>> from numtk.torch.dipg import candidate_edges
    >>> path = torch.tensor([[0, 1, 2, 3], [1, 2, 3, 4]])  # 0 - 1 - 2 - 3 - 4
    >>> r = candidate_edges(path, 5, 2, hops=1)
    >>> r.nodes, r.candidates
    (tensor([1, 2, 3]), tensor([[2, 2],
            [1, 3]]))
    """
    num_nodes = _check_num_nodes(num_nodes)
    edges = _check_edges(edges, num_nodes, nodes_of="num_nodes")
    target = check_int(target, "target", minimum=0)
    if target >= num_nodes:
        raise ValueError(f"`target` must be a node id in [0, {num_nodes}) (`num_nodes`); got {target}")
    hops = check_int(hops, "hops", minimum=1)
    # relabel the ids that occur (the edges' ends and the target) to 0..n'-1: every table is O(E), whatever
    # num_nodes
    ids = torch.unique(torch.cat([edges.reshape(-1), torch.tensor([target], device=edges.device)]))
    local = torch.searchsorted(ids, edges.reshape(-1)).reshape(edges.shape)
    t_local = torch.searchsorted(ids, torch.tensor([target], device=edges.device))
    n_local = ids.numel()
    nodes = ids[_reach(local, n_local, t_local, min(hops, n_local))]
    others = nodes[nodes != target]
    candidates = torch.stack([torch.full_like(others, target), others])
    keep = torch.isin(edges[0], nodes) & torch.isin(edges[1], nodes)
    return Result(nodes=nodes, candidates=candidates, subgraph_edges=edges[:, keep])


# --------------------------------------------------------------------------------------------------
# the GCN
# --------------------------------------------------------------------------------------------------
def _propagate(x: "torch.Tensor", edges: "torch.Tensor", weight: "torch.Tensor") -> "torch.Tensor":
    """``D^-1/2 (A + I) D^-1/2 x`` with ``A[dst, src] += weight`` and ``D = diag(1 + row sums of A)``."""
    n = x.shape[0]
    deg = torch.ones(n, dtype=x.dtype, device=x.device).index_add(0, edges[1], weight)
    inv = deg.rsqrt()
    norm = inv[edges[0]] * weight * inv[edges[1]]
    out = x * (inv * inv).unsqueeze(1)
    return out.index_add(0, edges[1], x[edges[0]] * norm.unsqueeze(1))


def _module_dims(value: Any, name: str) -> int:
    value = check_int(value, name, minimum=1)
    if value > 2**20:
        raise ValueError(f"`{name}` must be at most {2**20}; got {value}")
    return value


@constraints(in_dim="count", hidden="count", out_dim="count")
class GCN(torch.nn.Module):
    """A two-layer graph convolutional network (Kipf and Welling, 2017) in plain torch.

    ``GCN(x) = A_hat relu(A_hat x W1 + b1) W2 + b2`` with ``A_hat = D^-1/2 (A + I) D^-1/2``, ``A[dst, src]``
    the summed weights of the edges ``src -> dst`` and ``D`` the diagonal of the row sums of ``A + I``.
    Edge weights (``>= 0``) let a mask weight added edges.

    Messages pass only along the listed directions (``src -> dst``): an undirected graph lists each edge in
    both directions. The identity is added on top of whatever the edges hold: a listed self-loop ``v -> v``
    adds its weight to the unit self-loop (no deduplication).

    Parameters
    ----------
    in_dim, hidden, out_dim : int
        Feature, hidden and output widths (each at most 2**20).

    Examples
    --------
    >>> from numtk.torch.dipg import GCN
    >>> gcn = GCN(3, 8, 2)
    >>> x = torch.randn(4, 3)
    >>> ring = torch.tensor([[0, 1, 2, 3, 1, 2, 3, 0], [1, 2, 3, 0, 0, 1, 2, 3]])
    >>> gcn(x, ring).shape
    torch.Size([4, 2])
    """

    def __init__(self, in_dim: int, hidden: int, out_dim: int) -> None:
        super().__init__()
        self.in_dim = _module_dims(in_dim, "in_dim")
        self.hidden = _module_dims(hidden, "hidden")
        self.out_dim = _module_dims(out_dim, "out_dim")
        self.lin1 = torch.nn.Linear(self.in_dim, self.hidden)
        self.lin2 = torch.nn.Linear(self.hidden, self.out_dim)

    @constraints(x="tensor", edges="tensor", edge_weight="tensor")
    def forward(self, x: "torch.Tensor", edges: "torch.Tensor", edge_weight: Any = None) -> "torch.Tensor":
        """The node outputs, shape ``(N, out_dim)``.

        Parameters
        ----------
        x : torch.Tensor, shape ``(N, in_dim)``
            Node features (finite, the dtype of the parameters).
        edges : torch.Tensor, shape ``(2, E)``
            int32 or int64 (source, destination) ids in ``[0, N)``.
        edge_weight : torch.Tensor, shape ``(E,)``, optional
            Finite weights ``>= 0`` (default: ones); gradients flow to them.
        """
        x = check_tensor(x, "x", shape=(None, self.in_dim))
        if x.shape[0] == 0:
            raise ValueError("`x` must have at least one node; got shape (0, ...)")
        if x.dtype != self.lin1.weight.dtype:
            raise TypeError(f"`x` must have the dtype of the module's parameters, {self.lin1.weight.dtype}; got "
                            f"{x.dtype} (convert the module with .to(dtype) or the features)")
        edges = _check_edges(edges, x.shape[0], nodes_of="x")
        check_same_device(x=x, edges=edges)
        if edge_weight is None:
            edge_weight = torch.ones(edges.shape[1], dtype=x.dtype, device=x.device)
        else:
            check_tensor(edge_weight, "edge_weight", shape=(edges.shape[1],))
            if edge_weight.numel() and bool((edge_weight < 0).any()):
                raise ValueError("`edge_weight` must be >= 0")
            check_same_device(x=x, edge_weight=edge_weight)
            edge_weight = edge_weight.to(x.dtype)
        return self._forward(x, edges, edge_weight)

    def _forward(self, x, edges, edge_weight):
        h = torch.relu(_propagate(self.lin1(x), edges, edge_weight))
        return _propagate(self.lin2(h), edges, edge_weight)


# --------------------------------------------------------------------------------------------------
# the discrete graph prompt
# --------------------------------------------------------------------------------------------------
def _check_gnn(gnn: Any) -> Any:
    if not isinstance(gnn, torch.nn.Module):
        raise TypeError(f"`gnn` must be a torch.nn.Module called as gnn(x, edges, edge_weight); got "
                        f"{type(gnn).__name__}")
    return gnn


@constraints(gnn="any", k="int>=1", score_hidden="count", lam="real>=0", num_classes="count", embed_dim="count",
             hops="cap", n_samples="count", noise_temperature="real>=0", mode="option", temperature="real>0")
class DiscreteGraphPrompt(torch.nn.Module):
    """DiP-G: a frozen GNN adapted by k prompt edges per target node, chosen as a hard top-k.

    For each target node ``t``: the ``hops``-hop subgraph (:func:`candidate_edges`), the candidate edges
    ``t <-> v`` to each other subgraph node, scores ``theta_v = MLP(h_t + h_v)`` from the frozen GNN's
    embeddings ``h`` of the whole graph, a k-hot mask ``z`` over the candidates and the frozen GNN run on the
    subgraph with the candidate edges added (both directions) at weights ``z``; a linear head maps the target's
    output to class logits. In training ``z`` comes from :func:`imle_topk` (perturbed top-k forward, I-MLE
    backward); in evaluation (``model.eval()``) it is the deterministic ``topk(theta)``, so training and test
    use the same kind of hard mask. Only the score MLP and the head are trained: the GNN's parameters are
    frozen (``requires_grad_(False)``) at construction.

    Parameters
    ----------
    gnn : torch.nn.Module
        The frozen GNN, called as ``gnn(x, edges, edge_weight)`` -> ``(N, D)`` (e.g. :class:`GCN`; not checked
        by the constraint vocabulary: an ``nn.Module``).
    k : int
        Prompt edges per target, ``>= 1`` (fewer when a subgraph has fewer candidates).
    score_hidden : int
        Width of the score MLP's hidden layer.
    lam : float
        I-MLE's ``lam``.
    num_classes : int, optional
        Outputs of the linear head (default: ``D``).
    embed_dim : int, optional
        ``D``, when ``gnn`` has no ``out_dim`` attribute.
    hops : int
        The subgraph radius.
    n_samples, noise_temperature : int, float
        I-MLE's samples (their logits are averaged, so the effective I-MLE target step is ``lam / n_samples``,
        as in torch-imle) and noise temperature.
    mode : {"imle", "sigmoid", "gumbel_sigmoid"}
        The training-time mask: DiP-G's hard I-MLE top-k, or, for comparison, a continuous prompt in the style
        of GraphTOP: soft weights ``sigmoid(theta / temperature)`` on every candidate (with logistic noise for
        ``"gumbel_sigmoid"``). Evaluation always uses the hard ``topk(theta)``, so the continuous modes show the
        train/test mismatch DiP-G removes.
    temperature : float
        The sigmoid's temperature in the continuous modes (GraphTOP's 0.2; may be annealed by setting the
        attribute between steps).

    Attributes
    ----------
    last_mask : torch.Tensor or None
        The mask (or soft weights) of the last forward, shape ``(S, T, M)`` (``S`` samples, ``M`` candidate
        slots; slots past a target's candidates are padding), for regularisers.
    last_scores : torch.Tensor or None
        The scores ``theta`` of the last forward, shape ``(T, M)``, ``-inf`` in the padding slots.

    Examples
    --------
    >>> from numtk.torch.dipg import GCN, DiscreteGraphPrompt
    >>> gen = torch.Generator().manual_seed(0)
    >>> x = torch.randn(6, 3, generator=gen)
    >>> edges = torch.tensor([[0, 1, 1, 2, 2, 3, 3, 4, 4, 5], [1, 0, 2, 1, 3, 2, 4, 3, 5, 4]])
    >>> model = DiscreteGraphPrompt(GCN(3, 8, 4), k=2, num_classes=2)
    >>> model(x, edges, torch.tensor([0, 3]), rng=0).shape
    torch.Size([2, 2])
    >>> model.eval().selected_nodes(x, edges, torch.tensor([0, 3])).shape
    torch.Size([2, 2])
    """

    def __init__(self, gnn: Any, k: int, *, score_hidden: int = 64, lam: float = 10.0, num_classes: Any = None,
                 embed_dim: Any = None, hops: int = 2, n_samples: int = 1, noise_temperature: float = 1.0,
                 mode: str = "imle", temperature: float = 0.2) -> None:
        super().__init__()
        self.gnn = _check_gnn(gnn)
        self.k = check_int(k, "k", minimum=1, maximum=_MAX_K)
        score_hidden = _module_dims(score_hidden, "score_hidden")
        self.lam = check_real(lam, "lam", low=0.0)
        if embed_dim is None:
            embed_dim = getattr(gnn, "out_dim", None)
            if embed_dim is None:
                raise ValueError("`embed_dim` must be given when `gnn` has no `out_dim` attribute")
        embed_dim = _module_dims(embed_dim, "embed_dim")
        num_classes = embed_dim if num_classes is None else _module_dims(num_classes, "num_classes")
        self.hops = check_int(hops, "hops", minimum=1)
        self.n_samples = check_int(n_samples, "n_samples", minimum=1, maximum=_MAX_SAMPLES)
        self.noise_temperature = check_real(noise_temperature, "noise_temperature", low=0.0)
        self.mode = check_option(mode, "mode", _MODES)
        self.temperature = check_real(temperature, "temperature", low=0.0, low_open=True)
        for p in self.gnn.parameters():
            p.requires_grad_(False)
        self.gnn.eval()
        self.scorer = torch.nn.Sequential(torch.nn.Linear(embed_dim, score_hidden), torch.nn.ReLU(),
                                          torch.nn.Linear(score_hidden, 1))
        self.head = torch.nn.Linear(embed_dim, num_classes)
        self.last_mask = self.last_scores = None

    @constraints(mode="bool")
    def train(self, mode: bool = True) -> "DiscreteGraphPrompt":
        """Set the training mode of the score MLP and the head; the frozen GNN stays in evaluation mode (its
        dropout off, its batch-norm statistics fixed) whatever ``mode``."""
        super().train(check_bool(mode, "mode"))
        self.gnn.eval()
        return self

    # the batch of subgraphs ------------------------------------------------------------------------
    def _check_inputs(self, x, edges, targets):
        x = check_tensor(x, "x", ndim=2)
        if x.shape[0] == 0:
            raise ValueError("`x` must have at least one node; got shape (0, ...)")
        edges = _check_edges(edges, x.shape[0], nodes_of="x")
        if not isinstance(targets, torch.Tensor):
            raise TypeError(f"`targets` must be a torch.Tensor of node ids; got {type(targets).__name__}")
        if targets.dtype not in (torch.int32, torch.int64):
            raise TypeError(f"`targets` must hold int32 or int64 node ids; got dtype {targets.dtype}")
        if targets.ndim != 1:
            raise ValueError(f"`targets` must be a 1-D tensor of node ids; got {targets.ndim}-D")
        if targets.numel() and (int(targets.min()) < 0 or int(targets.max()) >= x.shape[0]):
            raise ValueError(f"`targets` must hold node ids in [0, {x.shape[0]}) (the rows of `x`)")
        if edges.device != x.device or targets.device != x.device:
            raise ValueError("`edges` and `targets` must be on the device of `x`")
        return x, edges, targets.long()

    def _embeddings(self, x, embeddings):
        if embeddings is None:
            return None
        check_tensor(embeddings, "embeddings", shape=(x.shape[0], self.head.in_features))
        if embeddings.dtype != self.head.weight.dtype:
            raise TypeError(f"`embeddings` must have the dtype of the module's parameters, {self.head.weight.dtype}; "
                            f"got {embeddings.dtype}")
        if embeddings.device != x.device:
            raise ValueError(f"`embeddings` must be on the device of `x`, {x.device}; got {embeddings.device}")
        return embeddings

    @constraints(x="tensor", edges="tensor")
    def embed(self, x: "torch.Tensor", edges: "torch.Tensor") -> "torch.Tensor":
        """The frozen GNN's embeddings of the whole graph, ``gnn(x, edges)`` without gradients, shape ``(N, D)``:
        pass them as ``embeddings=`` to reuse them over training steps on one graph."""
        x = check_tensor(x, "x", ndim=2)
        if x.shape[0] == 0:
            raise ValueError("`x` must have at least one node; got shape (0, ...)")
        edges = _check_edges(edges, x.shape[0], nodes_of="x")
        with torch.no_grad():
            return self.gnn(x, edges, None)

    def _batch(self, x, edges, targets, h=None):
        """Scores of the candidates (T, M) padded with -inf, and the union graph of the subgraphs."""
        n = x.shape[0]
        T = targets.numel()
        dev = x.device
        keys = _reach(edges, n, targets, min(self.hops, n))
        pr, pv = keys // n, keys % n  # union node u = (target row pr[u], node pv[u]), row-major
        u_src, u_dst, _ = _induced(edges, n, keys)
        u_target = torch.searchsorted(keys, torch.arange(T, device=dev) * n + targets)
        # candidates: every subgraph node but the target, padded per row
        is_cand = pv != targets[pr]
        cr, cv = pr[is_cand], pv[is_cand]
        u_cand = torch.arange(keys.numel(), device=dev)[is_cand]
        counts = torch.bincount(cr, minlength=T)
        width = max(int(counts.max()) if T else 0, self.k)
        starts = torch.cumsum(counts, 0) - counts
        slot = torch.arange(cr.numel(), device=dev) - starts[cr]
        if h is None:
            with torch.no_grad():
                h = self.gnn(x, edges, None)
        s = self.scorer(h[targets[cr]] + h[cv]).squeeze(-1)
        theta = torch.full((T, width), -math.inf, dtype=s.dtype, device=dev)
        theta = theta.index_put((cr, slot), s)
        graph = (pv, u_src, u_dst, cr, cv, slot, u_target, u_cand)
        return theta, graph

    def _mask(self, theta, rng):
        if not self.training:
            return _topk(theta, self.k).unsqueeze(0)
        gen = device_generator(rng, theta.device)
        if self.mode != "imle":
            logits = theta
            if self.mode == "gumbel_sigmoid":
                u = torch.rand(theta.shape, generator=gen, dtype=theta.dtype, device=theta.device)
                u = u.clamp(1e-12, 1 - 1e-12)
                logits = theta + torch.log(u) - torch.log1p(-u)
            return torch.sigmoid(logits / self.temperature).unsqueeze(0)
        shape = (self.n_samples, *theta.shape)
        check_size(self.n_samples * theta.numel(), _GAMMA_BYTES + 4 * theta.element_size(), "n_samples")
        if self.noise_temperature == 0.0:
            eps = torch.zeros(shape, dtype=theta.dtype, device=theta.device)
        else:
            eps = self.noise_temperature * _gamma_sum(shape, float(self.k), 10, gen, theta.dtype, theta.device)
        return _imle(theta, self.k, self.lam, eps)

    @constraints(x="tensor", edges="tensor", targets="tensor", rng="rng", embeddings="tensor")
    def forward(self, x: "torch.Tensor", edges: "torch.Tensor", targets: "torch.Tensor", *,
                rng: Any = None, embeddings: Any = None) -> "torch.Tensor":
        """Class logits of the target nodes, shape ``(T, num_classes)``.

        Parameters
        ----------
        x : torch.Tensor, shape ``(N, F)``
            Node features.
        edges : torch.Tensor, shape ``(2, E)``
            int32 or int64 edges of the whole graph.
        targets : torch.Tensor, shape ``(T,)``
            int32 or int64 target node ids.
        rng : None, int, numpy.random.Generator or torch.Generator
            The I-MLE noise in training (unused in evaluation).
        embeddings : torch.Tensor, shape ``(N, D)``, optional
            The frozen GNN's embeddings of the graph (:meth:`embed`), computed when not given.
        """
        x, edges, targets = self._check_inputs(x, edges, targets)
        embeddings = self._embeddings(x, embeddings)
        if targets.numel() == 0:
            return x.new_zeros((0, self.head.out_features))
        theta, graph = self._batch(x, edges, targets, embeddings)
        z = self._mask(theta, rng)
        self.last_mask, self.last_scores = z, theta
        return self._logits(x, theta, z, graph)

    def _logits(self, x, theta, z, graph):
        pv, u_src, u_dst, cr, cv, slot, u_target, u_cand = graph
        xu = x[pv]
        u_t = u_target[cr]
        src = torch.cat([u_src, u_t, u_cand])
        dst = torch.cat([u_dst, u_cand, u_t])
        out = 0.0
        for zs in z:
            w_c = zs[cr, slot]
            w = torch.cat([torch.ones(u_src.numel(), dtype=x.dtype, device=x.device), w_c, w_c])
            hu = self.gnn(xu, torch.stack([src, dst]), w)
            out = out + self.head(hu[u_target])
        return out / z.shape[0]

    @constraints(x="tensor", edges="tensor", targets="tensor", embeddings="tensor")
    def scores(self, x: "torch.Tensor", edges: "torch.Tensor", targets: "torch.Tensor", *,
               embeddings: Any = None) -> Result:
        """The candidate scores of the targets (arguments as in :meth:`forward`).

        Returns
        -------
        Result
            theta : torch.Tensor
                Shape ``(T, M)``: the scores, ``-inf`` in the padding (``M`` the most candidates of a target, at
                least k).
            candidates : torch.Tensor
                int64, shape ``(T, M)``: row ``i`` the subgraph nodes of ``targets[i]`` but itself, in node
                order, padded with -1.
        """
        x, edges, targets = self._check_inputs(x, edges, targets)
        theta, graph = self._batch(x, edges, targets, self._embeddings(x, embeddings))
        _, _, _, cr, cv, slot, _, _ = graph
        cand = torch.full(theta.shape, -1, dtype=torch.long, device=theta.device)
        cand[cr, slot] = cv
        return Result(theta=theta, candidates=cand)

    @constraints(x="tensor", edges="tensor", targets="tensor", embeddings="tensor")
    def selected_nodes(self, x: "torch.Tensor", edges: "torch.Tensor", targets: "torch.Tensor", *,
                       embeddings: Any = None) -> "torch.Tensor":
        """The k nodes the evaluation-time mask ``topk(theta)`` connects to each target, shape ``(T, k)``
        (``-1`` where a subgraph has fewer than k candidates), in candidate order."""
        with torch.no_grad():
            r = self.scores(x, edges, targets, embeddings=embeddings)
            mask = _topk(r.theta, self.k).bool()
        return r.candidates[mask].reshape(r.theta.shape[0], self.k)
