"""TokenDrop: token-level backpropagation skipping for llama-layout decoder blocks (reconstructed).

TokenDrop (Kim, Namkung, Jeon; ICML 2026) skips the backward computation of the less informative tokens during
parameter-efficient fine-tuning. Its code was not available; the mechanism here is reconstructed from the
abstract, from DropBP (the same lab's layer-level skipping) and from TokenTune (a token-level no-grad split):

* score of token t at block l: the size of its residual update, ``s = ||x_{l+1,t} - x_{l,t}||_2``; cumulative
  score ``S_l = sum_{l' <= l} s_{l'}``;
* selection: the top ``ceil(rho T)`` tokens of each sequence by the cumulative score of the blocks already run,
  nested across depth (the set of a block contains the set of every shallower block);
* lazy scheduling: the first ``lazy_layers`` blocks run dense and only score; the set is chosen once they are
  scored;
* skipping: the block runs its norms, projections and MLP for the unselected tokens under ``torch.no_grad()``
  (nothing of theirs is saved for backward) and for the selected tokens with autograd; selected queries attend
  over the keys and values of every token (those of unselected tokens without gradient), in the original order
  with the causal mask of the original positions, through ``scaled_dot_product_attention`` (no attention
  probabilities saved). An unselected token's gradient passes its block through the
  residual connection only.

The open choices (keep ratio, lazy depth, the cumulative rule) are parameters; see ``cumulative_topk`` for the
exact nesting rule.
"""

from __future__ import annotations

import inspect
import math
from typing import Any, Callable

import numpy as np

from numtk._lib._constraints import constraints
from numtk._lib._validation import check_bool, check_int, check_option, check_real
from numtk.torch._common import check_tensor, torch, torch_generator
from numtk.torch._tinyllama import attend, causal_allowed, rope

nn = torch.nn

__all__ = ["residual_update_scores", "cumulative_topk", "keep_count", "TokenDropBlock", "LayerDropBlock",
           "wrap_model", "unwrap_model", "saved_activation_bytes"]

_MODES = ("tokendrop", "layerdrop")
_SKIPS = ("no_grad", "detach")
_LLAMA_PARTS = ("input_layernorm", "self_attn", "post_attention_layernorm", "mlp")
_ATTN_PARTS = ("q_proj", "k_proj", "v_proj", "o_proj")
#: a block that keeps every token runs the dense block itself (the same values and gradient, no split); the
#: tests turn this off to run the split with an all-true selection
_DENSE_WHEN_ALL_KEPT = True


# --------------------------------------------------------------------------------------------------
# scores and selection
# --------------------------------------------------------------------------------------------------
@constraints(x_in="tensor", x_out="tensor")
def residual_update_scores(x_in: "torch.Tensor", x_out: "torch.Tensor") -> "torch.Tensor":
    """TokenDrop's token scores: the L2 norm of each token's residual update ``x_out - x_in``.

    Parameters
    ----------
    x_in, x_out : torch.Tensor
        (..., T, D) hidden states before and after a block (the same shape, dtype and device).

    Returns
    -------
    torch.Tensor
        (..., T) norms ``||x_out[..., t, :] - x_in[..., t, :]||_2``, computed without autograd (the scores are
        gradient-free), in the inputs' dtype.

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.tokendrop import residual_update_scores
    >>> x = torch.zeros(1, 2, 2)
    >>> residual_update_scores(x, torch.tensor([[[3.0, 4.0], [0.0, 1.0]]]))
    tensor([[5., 1.]])
    """
    check_tensor(x_in, "x_in")
    check_tensor(x_out, "x_out")
    if x_in.ndim < 2:
        raise ValueError(f"`x_in` must be (..., T, D) with at least 2 dimensions; got shape {tuple(x_in.shape)}")
    if x_in.shape != x_out.shape:
        raise ValueError(f"`x_in` and `x_out` must have the same shape; got {tuple(x_in.shape)} and "
                         f"{tuple(x_out.shape)}")
    if x_in.dtype != x_out.dtype or x_in.device != x_out.device:
        raise ValueError(f"`x_in` and `x_out` must share dtype and device; got {x_in.dtype} on {x_in.device} and "
                         f"{x_out.dtype} on {x_out.device}")
    return _scores(x_in, x_out)


def _scores(x_in: "torch.Tensor", x_out: "torch.Tensor") -> "torch.Tensor":
    with torch.no_grad():
        return torch.linalg.vector_norm(x_out - x_in, dim=-1)


@constraints(rho="prob", length="int>=0")
def keep_count(rho: float, length: int) -> int:
    """The number of tokens TokenDrop keeps of a sequence of ``length``: ``ceil(rho * length)``, at least one.

    ``rho * length`` is rounded to 9 decimals before the ceiling, so that a ratio written in decimal keeps what
    it says (``0.1 * 10`` is 1.0000000000000000555 in binary: 1 token, not 2).

    Parameters
    ----------
    rho : float
        Keep ratio in (0, 1].
    length : int
        Tokens in the sequence.

    Returns
    -------
    int
        ``min(length, max(1, ceil(rho * length)))`` (0 for an empty sequence).

    Examples
    --------
    >>> from numtk.torch.tokendrop import keep_count
    >>> keep_count(0.1, 10), keep_count(0.5, 7), keep_count(0.01, 10), keep_count(1.0, 10)
    (1, 4, 1, 10)
    """
    rho = _check_rho(rho)
    length = check_int(length, "length", minimum=0, maximum=2**31 - 1)
    if length == 0:
        return 0
    return min(length, max(1, math.ceil(round(rho * length, 9))))


def _check_rho(rho: Any, name: str = "rho") -> float:
    rho = check_real(rho, name, low=0.0, high=1.0)
    if rho <= 0.0:
        raise ValueError(f"`{name}` must be in (0, 1] (the fraction of tokens kept); got {rho}")
    return rho


@constraints(scores="tensor", rho="prob", prev_mask="any")
def cumulative_topk(scores: "torch.Tensor", rho: float, prev_mask: "torch.Tensor | None" = None) -> "torch.Tensor":
    """TokenDrop's nested selection: the top ``ceil(rho T)`` tokens of each sequence, containing ``prev_mask``.

    The rule (reconstructed; the paper states only that the selection is cumulative and keeps gradient paths
    continuous across layers): each sequence keeps exactly ``k = keep_count(rho, T)`` tokens. The tokens of
    ``prev_mask`` (the set of the shallower layer) are kept first; the remaining ``k - |prev|`` places go to
    the other tokens in decreasing order of ``scores`` (the cumulative scores of the blocks run so far), ties
    to the earlier position. So the set of a layer is a subset of the set of every deeper layer: with one
    ``rho`` for all layers the set is fixed once chosen; a keep ratio growing with depth adds tokens to it. A
    ``prev_mask`` holding more than ``k`` tokens in a sequence would break the nesting and is refused.

    Parameters
    ----------
    scores : torch.Tensor
        (B, T) or (T,) finite scores; larger is kept first.
    rho : float
        Keep ratio in (0, 1].
    prev_mask : torch.Tensor, optional
        Boolean mask of ``scores``' shape: the tokens selected at the shallower layer.

    Returns
    -------
    torch.Tensor
        Boolean mask of ``scores``' shape with ``k`` True entries per sequence, on ``scores``' device.

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.tokendrop import cumulative_topk
    >>> s = torch.tensor([[0.1, 0.9, 0.5, 0.9]])
    >>> cumulative_topk(s, 0.5)  # ties to the earlier position
    tensor([[False,  True, False,  True]])
    >>> cumulative_topk(s, 0.75, prev_mask=torch.tensor([[True, False, False, False]]))
    tensor([[ True,  True, False,  True]])
    """
    check_tensor(scores, "scores")
    if scores.ndim not in (1, 2):
        raise ValueError(f"`scores` must be (B, T) or (T,); got shape {tuple(scores.shape)}")
    rho = _check_rho(rho)
    T = scores.shape[-1]
    k = keep_count(rho, T)
    key = scores.detach()
    if prev_mask is not None:
        check_tensor(prev_mask, "prev_mask", dtype=torch.bool, finite=False)
        if prev_mask.shape != scores.shape:
            raise ValueError(f"`prev_mask` must have the shape of `scores` {tuple(scores.shape)}; got "
                             f"{tuple(prev_mask.shape)}")
        if prev_mask.device != scores.device:
            raise ValueError(f"`prev_mask` must be on the device of `scores` ({scores.device}); got "
                             f"{prev_mask.device}")
        n_prev = prev_mask.sum(-1)
        if n_prev.numel() and int(n_prev.max()) > k:
            raise ValueError(f"`prev_mask` selects {int(n_prev.max())} tokens in a sequence but rho = {rho} keeps "
                             f"{k} of {T}: the set of a deeper layer must contain the shallower layer's (the keep "
                             "ratio must not decrease with depth)")
        key = key.masked_fill(prev_mask, float("inf"))
    order = torch.sort(key, dim=-1, descending=True, stable=True).indices[..., :k]
    return torch.zeros(scores.shape, dtype=torch.bool, device=scores.device).scatter(-1, order, True)


# --------------------------------------------------------------------------------------------------
# autograd helpers
# --------------------------------------------------------------------------------------------------
class _ReplaceValue(torch.autograd.Function):
    """Returns ``value`` (a copy) and passes the output gradient to ``path``: the value of one computation with
    the gradient of another (used where both are the same function, computed two ways)."""

    @staticmethod
    def forward(ctx: Any, path: "torch.Tensor", value: "torch.Tensor") -> "torch.Tensor":
        return value.detach().clone()

    @staticmethod
    def backward(ctx: Any, grad: "torch.Tensor") -> tuple:
        return grad, None


def _first(out: Any) -> "torch.Tensor":
    """The hidden states of a block's output (a tensor, or the first item of a tuple as older transformers)."""
    return out[0] if isinstance(out, (tuple, list)) else out


def _rewrap(out: Any, hidden: "torch.Tensor") -> Any:
    if isinstance(out, tuple):
        return (hidden,) + tuple(out[1:])
    if isinstance(out, list):
        return [hidden] + list(out[1:])
    return hidden


# --------------------------------------------------------------------------------------------------
# the selection state shared by the blocks of one model
# --------------------------------------------------------------------------------------------------
class _State:
    """The cumulative scores, the current set and the split's plan of one forward pass, shared by the wrapped
    blocks of a model (the block at depth 0 resets it, and the last block once it has run: the plan refers to
    the model's 4-D attention mask and rotary tables, which are not held between steps)."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.scores = None
        self.mask = None
        self.plan = None

    def plan_for(self, mask: "torch.Tensor", position_embeddings: tuple, attention_mask: Any, window: Any,
                 dtype: "torch.dtype") -> "_Plan":
        if self.plan is None or not self.plan.matches(mask, position_embeddings, attention_mask, window, dtype):
            self.plan = _Plan(mask, position_embeddings, attention_mask, window, dtype)
        return self.plan

    def add(self, s: "torch.Tensor") -> None:
        self.scores = s if self.scores is None else self.scores + s


def _check_block(block: Any, name: str = "block") -> None:
    """Refuse what the split cannot recompute: anything but a pre-norm llama block (norm, attention, residual;
    norm, MLP, residual) with causal softmax attention over rotary-embedded projections."""
    if not isinstance(block, nn.Module):
        raise TypeError(f"`{name}` must be a torch.nn.Module (a llama-layout decoder block); got "
                        f"{type(block).__name__}")
    missing = [p for p in _LLAMA_PARTS if not hasattr(block, p)]
    attn = getattr(block, "self_attn", None)
    missing += [f"self_attn.{p}" for p in _ATTN_PARTS if attn is not None and not hasattr(attn, p)]
    if attn is not None and not hasattr(attn, "head_dim"):
        missing.append("self_attn.head_dim")
    if missing:
        raise ValueError(f"`{name}` must be a llama-layout decoder block (transformers' names: input_layernorm, "
                         f"self_attn.{{q,k,v,o}}_proj, post_attention_layernorm, mlp); missing {missing}")
    not_llama = f"`{name}` ({type(block).__name__}) is not a llama-layout block that TokenDropBlock can recompute"
    for extra in ("q_norm", "k_norm"):
        if hasattr(attn, extra):
            raise ValueError(f"{not_llama}: it has self_attn.{extra} (a query/key norm, as Qwen3 and Gemma3)")
    extra_parts = [n for n, _ in block.named_children() if n not in _LLAMA_PARTS]
    extra_parts += [f"self_attn.{n}" for n, _ in attn.named_children() if n not in _ATTN_PARTS + ("rotary_emb",)]
    if extra_parts:
        raise ValueError(f"{not_llama}: it has submodules {extra_parts} besides the pre-norm llama parts (extra or "
                         "post-branch norms, as Gemma2's pre_/post_feedforward_layernorm, change the block's "
                         "function)")
    if getattr(attn, "is_causal", True) is False:
        raise ValueError(f"{not_llama}: its self_attn has is_causal = False (TokenDropBlock recomputes causal "
                         "attention)")
    if getattr(attn, "attn_logit_softcapping", None) is not None:
        raise ValueError(f"{not_llama}: its self_attn caps the attention logits (attn_logit_softcapping = "
                         f"{attn.attn_logit_softcapping}, as Gemma2)")
    clip = getattr(getattr(attn, "config", None), "clip_qkv", None)
    if clip is not None:
        raise ValueError(f"{not_llama}: its self_attn clips queries, keys and values (clip_qkv = {clip}, as OLMo)")
    multiplier = getattr(block, "residual_multiplier", None)
    if multiplier is not None and float(multiplier) != 1.0:
        raise ValueError(f"{not_llama}: it scales its residual branches (residual_multiplier = {multiplier}, as "
                         "Granite)")
    if float(getattr(attn, "attention_dropout", 0.0) or 0.0) > 0.0:
        raise ValueError(f"`{name}` uses attention dropout; TokenDropBlock recomputes attention without it (set "
                         "attention_dropout = 0)")


def _attention_geometry(attn: "nn.Module") -> tuple[int, int, int, float]:
    """(query heads, key/value heads, head width, score scaling) of a llama attention module."""
    hd = int(attn.head_dim)
    q_out = _out_features(attn.q_proj)
    kv_out = _out_features(attn.k_proj)
    scaling = float(getattr(attn, "scaling", hd ** -0.5))
    return q_out // hd, kv_out // hd, hd, scaling


def _out_features(linear: "nn.Module") -> int:
    n = getattr(linear, "out_features", None)
    if n is None:
        n = getattr(linear, "weight").shape[0]
    return int(n)


# --------------------------------------------------------------------------------------------------
# TokenDropBlock
# --------------------------------------------------------------------------------------------------
@constraints(block="any", rho="prob", lazy_layers="int>=0", exact="bool")
class TokenDropBlock(nn.Module):
    """A llama-layout decoder block that backpropagates through its selected tokens only (TokenDrop,
    reconstructed).

    The block's forward is recomputed with the token split: the unselected tokens run the norms, the
    projections, attention and the MLP under ``torch.no_grad()`` (none of their activations is saved for
    backward) and pass the gradient through the residual connection only; the selected tokens run with
    autograd, their queries attending over the keys and values of every token (the unselected tokens' without
    gradient, so none leaks into them) in the original order, with the rows of the model's attention mask (or
    the causal mask) at their original positions. Attention runs through
    :func:`torch.nn.functional.scaled_dot_product_attention`: its fused kernels save no attention
    probabilities, so the saving holds on long sequences (on transformers' ``sdpa`` models as on the tiny
    llama).

    Parameters
    ----------
    block : nn.Module
        One decoder block with transformers' llama names: ``input_layernorm``,
        ``self_attn.{q,k,v,o}_proj`` (with ``self_attn.head_dim``; any number of key/value heads),
        ``post_attention_layernorm``, ``mlp``. Called as transformers calls it: ``block(hidden_states,
        attention_mask=..., position_embeddings=(cos, sin), ...)``, returning the new hidden states. The
        projections, norms and MLP are called as modules, so LoRA-wrapped projections work.
    rho : float, default 0.5
        Keep ratio in (0, 1]: ``ceil(rho T)`` tokens of each sequence get a backward pass.
    lazy_layers : int, default 0
        The block runs dense (every token with autograd) and only scores when its depth in the model (set by
        :func:`wrap_model`; 0 for a block used alone) is below ``lazy_layers``.
    exact : bool, default True
        True: the output values come from the wrapped block's own forward, run under ``torch.no_grad()``, so they
        are bit-identical to the dense block's for any selection, dtype and device; the gradient comes from the
        split computation of the selected tokens (it saves exactly as little as the split). It costs the
        block's forward plus the split of the selected tokens (the unselected tokens' keys and values are
        projected twice). False: the split computation alone (forward work as the dense block's, backward work
        and saved activations about ``rho`` times): the same function computed in two row groups, so its output
        equals the dense block's up to rounding only (the backend's kernels need not give a row the same floats
        in a product of fewer rows). Its gradient is the same in both modes.

    Attributes
    ----------
    block : nn.Module
        The wrapped block.
    last_mask : torch.Tensor or None
        (B, T) boolean: the tokens given a backward pass in the last forward (None when it ran dense).
    last_scores : torch.Tensor or None
        (B, T): the residual-update scores of the last forward.

    Notes
    -----
    Selection, with ``token_mask`` not given: the top ``ceil(rho T)`` tokens by the cumulative scores of the
    blocks run before it in this forward, containing the set of the previous block (:func:`cumulative_topk`).
    The first selecting block of a forward, when no block before it was scored (``lazy_layers = 0``), scores
    its own residual updates by a forward under ``torch.no_grad()`` first (with ``exact``, that forward is the
    one it needs anyway).

    The split runs only in training mode with autograd enabled and without a key/value cache holding earlier
    tokens; otherwise the block runs unchanged. An empty transformers cache (``use_cache`` while training) gets
    this block's keys and values, as the dense block would give it. Blocks that are not pre-norm llama blocks are
    refused at construction: extra or post-branch norms (Gemma2's ``pre_feedforward_layernorm``), query/key
    norms (Qwen3), non-causal attention (``self_attn.is_causal = False``), capped attention logits (Gemma2),
    clipped projections (OLMo), scaled residual branches (Granite), attention dropout. A sliding window
    (``self_attn.sliding_window``, or Mistral's ``self_attn.config.sliding_window``) is followed: transformers
    passes it in the 4-D mask, and with a mask of None the causal mask keeps the ``window`` latest keys.
    transformers' ``output_hidden_states``/``output_attentions`` hooks see only blocks that run dense.

    Attributes that the wrapper does not have are read from the wrapped block (transformers' models read some
    of their decoder layers' attributes, Qwen2's ``attention_type`` say).

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.tokendrop import TinyLlamaConfig, TinyLlamaForCausalLM, TokenDropBlock
    >>> model = TinyLlamaForCausalLM(TinyLlamaConfig(num_hidden_layers=1), rng=0).double()
    >>> layer = model.model.layers[0]
    >>> x = torch.randn(2, 8, 64, dtype=torch.float64, requires_grad=True)
    >>> cos_sin = model.model.rotary_emb(x, torch.arange(8)[None])
    >>> block = TokenDropBlock(layer, rho=0.25)
    >>> y = block(x, position_embeddings=cos_sin)
    >>> torch.equal(y, layer(x, position_embeddings=cos_sin)), block.last_mask.sum(1).tolist()
    (True, [2, 2])
    """

    def __init__(self, block: "nn.Module", *, rho: float = 0.5, lazy_layers: int = 0, exact: bool = True) -> None:
        _check_block(block)
        rho = _check_rho(rho)
        lazy_layers = check_int(lazy_layers, "lazy_layers", minimum=0, maximum=2**31 - 1)
        exact = check_bool(exact, "exact")
        super().__init__()
        self.block = block
        self.rho = rho
        self.lazy_layers = lazy_layers
        self.exact = exact
        self.last_mask = None
        self.last_scores = None
        self._depth = 0
        self._last = True  # the last block of its model (wrap_model sets it): it drops the shared state
        self._state = _State()
        self._signature = inspect.signature(block.forward)
        _keep_state_dict_keys(self)

    def extra_repr(self) -> str:
        return f"rho={self.rho}, lazy_layers={self.lazy_layers}, exact={self.exact}, depth={self._depth}"

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            return _wrapped_attribute(self, name)

    @constraints(hidden_states="tensor", token_mask="any")
    def forward(self, hidden_states: "torch.Tensor", *args: Any, token_mask: "torch.Tensor | None" = None,
                **kwargs: Any) -> Any:
        """The block's output, with backpropagation through the selected tokens only.

        Parameters
        ----------
        hidden_states : torch.Tensor
            (B, T, D) hidden states.
        *args, **kwargs
            The wrapped block's other arguments (``attention_mask``, ``position_embeddings``, ...), as the model
            passes them.
        token_mask : torch.Tensor, optional
            (B, T) boolean: the tokens to backpropagate through, the same number in each sequence; overrides
            the block's own selection (and sets the set deeper blocks must contain).

        Returns
        -------
        torch.Tensor
            What the wrapped block returns: the (B, T, D) new hidden states.
        """
        try:
            return self._forward(hidden_states, args, token_mask, kwargs)
        finally:
            if self._last:  # the model's last block: nothing of this forward's selection is held until the next
                self._state.reset()

    def _forward(self, hidden_states: "torch.Tensor", args: tuple, token_mask: Any, kwargs: dict) -> Any:
        # not checked for NaN here: that would cost a pass over the activations and a device sync per block
        x = check_tensor(hidden_states, "hidden_states", ndim=3, finite=False)
        B, T, _ = x.shape
        state = self._state
        if self._depth == 0:
            state.reset()
        if token_mask is not None:
            check_tensor(token_mask, "token_mask", shape=(B, T), dtype=torch.bool, finite=False)
            if token_mask.device != x.device:
                raise ValueError(f"`token_mask` must be on the device of `hidden_states` ({x.device}); got "
                                 f"{token_mask.device}")
            counts = token_mask.sum(1)
            if B and bool((counts != counts[0]).any()):
                raise ValueError(f"`token_mask` must select the same number of tokens in each sequence; got "
                                 f"{counts.tolist()}")
        bound = self._signature.bind_partial(hidden_states, *args, **kwargs).arguments
        cache = bound.get("past_key_values", bound.get("past_key_value"))
        has_past = cache is not None and _cached_length(cache, self.block) != 0
        if not (self.training and torch.is_grad_enabled()) or has_past or T == 0 or B == 0:
            out = self.block(hidden_states, *args, **kwargs)
            self._record(x, _first(out), None)
            return out
        if self._depth < self.lazy_layers and token_mask is None:
            out = self.block(hidden_states, *args, **kwargs)
            self._record(x, _first(out), None)
            return out

        position_embeddings = bound.get("position_embeddings")
        if position_embeddings is None:
            raise ValueError("TokenDropBlock needs the rotary tables: the model must call the block with "
                             "`position_embeddings=(cos, sin)` (transformers >= 4.48 does)")
        dense = None
        if _DENSE_WHEN_ALL_KEPT and token_mask is None and keep_count(self.rho, T) == T:  # the dense block itself
            out = self.block(hidden_states, *args, **kwargs)
            self._record(x, _first(out), torch.ones((B, T), dtype=torch.bool, device=x.device))
            return out
        if token_mask is None:
            base = state.scores
            if base is None:  # nothing scored yet: score this block's own residual updates, without autograd
                with torch.no_grad():
                    dense = _first(self.block(hidden_states, *args, **_without_cache(kwargs)))
                base = _scores(x, dense)
            prev = state.mask
            if prev is not None and prev.shape == (B, T) and int(prev[0].sum()) == keep_count(self.rho, T):
                mask = prev  # the set is full: cumulative_topk would return the same set (kept as one object)
            else:
                if not bool(torch.isfinite(base).all()):
                    raise ValueError(f"the hidden states of decoder block {self._depth} (its input `hidden_states`, "
                                     "or those of the blocks before it) are not finite (NaN or infinity): "
                                     "TokenDrop ranks the tokens by the size of their residual updates and cannot "
                                     "rank these")
                mask = cumulative_topk(base, self.rho, prev_mask=prev)
        else:
            mask = token_mask
        if _DENSE_WHEN_ALL_KEPT and int(mask[0].sum()) == T:  # every token selected: the dense block itself
            out = self.block(hidden_states, *args, **kwargs)
            self._record(x, _first(out), mask)
            return out
        if self.exact and dense is None:
            with torch.no_grad():
                dense = _first(self.block(hidden_states, *args, **kwargs))
            cache = None  # the dense block has filled it
        out = self._split(x, mask, bound.get("attention_mask"), position_embeddings, cache,
                          dense if self.exact else None)
        self._record(x, out, mask)
        return out

    def _record(self, x: "torch.Tensor", out: "torch.Tensor", mask: "torch.Tensor | None") -> None:
        s = _scores(x, out)
        self.last_scores = s
        self.last_mask = mask
        self._state.add(s)
        if mask is not None:
            self._state.mask = mask

    def _split(self, x: "torch.Tensor", mask: "torch.Tensor", attention_mask: Any, position_embeddings: tuple,
               cache: Any, dense: "torch.Tensor | None") -> "torch.Tensor":
        blk = self.block
        attn = blk.self_attn
        H, Hkv, hd, scaling = _attention_geometry(attn)
        B, T, D = x.shape
        plan = self._state.plan_for(mask, position_embeddings, attention_mask, _sliding_window(blk), x.dtype)
        k, n_u = plan.k, T - plan.k
        xf = x.reshape(B * T, D)

        def rows(flat: "torch.Tensor", n: int) -> "torch.Tensor":
            return xf.index_select(0, flat).view(B, n, D)

        def in_order(selected: Any, unselected: Any) -> "torch.Tensor":
            """(B, T, ...) from the (B, k, ...) rows of the selected and the (B, n_u, ...) rows of the unselected
            tokens, in the original order (a concatenation and a gather: both save only the index)."""
            parts = [t.reshape(B * t.shape[1], *t.shape[2:]) for t in (selected, unselected) if t is not None]
            both = parts[0] if len(parts) == 1 else torch.cat(parts, 0)
            return both.index_select(0, plan.inverse).view(B, T, *both.shape[1:])

        # the unselected tokens: no autograd (nothing of theirs is saved for backward)
        k_u = v_u = None
        if n_u:
            with torch.no_grad():
                x_u = rows(plan.flat_u, n_u)
                h_u = blk.input_layernorm(x_u)
                k_u = rope(attn.k_proj(h_u).view(B, n_u, Hkv, hd), plan.cos_u, plan.sin_u)
                v_u = attn.v_proj(h_u).view(B, n_u, Hkv, hd)
        # the selected tokens: with autograd
        k_s = v_s = None
        if k:
            x_s = rows(plan.flat_s, k)
            h_s = blk.input_layernorm(x_s)
            q_s = rope(attn.q_proj(h_s).view(B, k, H, hd), plan.cos_s, plan.sin_s)
            k_s = rope(attn.k_proj(h_s).view(B, k, Hkv, hd), plan.cos_s, plan.sin_s)
            v_s = attn.v_proj(h_s).view(B, k, Hkv, hd)
        # every token's keys and values, in the original order
        K = in_order(k_s, k_u)
        V = in_order(v_s, v_u)
        if cache is not None:  # an empty transformers cache: give it this block's keys and values
            cos, sin = position_embeddings
            cache.update(K.transpose(1, 2), V.transpose(1, 2), getattr(attn, "layer_idx", 0),
                         {"sin": sin, "cos": cos})
        z_s = None
        if k:
            y_s = x_s + attn.o_proj(attend(q_s, K, V, plan.allowed_s, scaling))
            z_s = y_s + blk.mlp(blk.post_attention_layernorm(y_s))
        if dense is not None:
            # exact: the values are the dense block's; the gradient is the split's (through the residual only
            # for the unselected tokens)
            path = in_order(z_s, rows(plan.flat_u, n_u) if n_u else None)
            return _ReplaceValue.apply(path, dense)
        z_u = None
        if n_u:
            with torch.no_grad():
                q_u = rope(attn.q_proj(h_u).view(B, n_u, H, hd), plan.cos_u, plan.sin_u)
                a_u = attn.o_proj(attend(q_u, K, V, plan.allowed_u, scaling))
                m_u = blk.mlp(blk.post_attention_layernorm(x_u + a_u))
            # the residual adds with autograd (they save nothing): the same floats as the dense block's
            z_u = (rows(plan.flat_u, n_u) + a_u) + m_u
        return in_order(z_s, z_u)


class _Plan:
    """The index bookkeeping of one token split, shared by the blocks that use the same set in one forward:
    positions, flat row indices, the inverse permutation, the rotary tables and attention masks of the selected
    and of the unselected tokens (so that each is built, and saved for backward, once)."""

    def __init__(self, mask: "torch.Tensor", position_embeddings: tuple, attention_mask: Any, window: Any,
                 dtype: "torch.dtype") -> None:
        B, T = mask.shape
        dev = mask.device
        k = int(mask[0].sum())
        sel = mask.nonzero()[:, 1].view(B, k)  # ascending positions, per sequence
        uns = (~mask).nonzero()[:, 1].view(B, T - k)
        offset = (torch.arange(B, device=dev) * T).unsqueeze(1)
        self.mask = mask
        self.position_embeddings = position_embeddings
        self.attention_mask = attention_mask
        self.window = window
        self.dtype = dtype
        self.k = k
        self.flat_s = (sel + offset).reshape(-1)
        self.flat_u = (uns + offset).reshape(-1)
        order = torch.cat([self.flat_s, self.flat_u])
        self.inverse = torch.empty_like(order).scatter_(0, order, torch.arange(B * T, device=dev))
        cos, sin = position_embeddings
        cos = cos.expand(B, T, cos.shape[-1]).reshape(B * T, -1)
        sin = sin.expand(B, T, sin.shape[-1]).reshape(B * T, -1)
        hd = cos.shape[-1]
        self.cos_s = cos.index_select(0, self.flat_s).view(B, k, hd)
        self.sin_s = sin.index_select(0, self.flat_s).view(B, k, hd)
        self.cos_u = cos.index_select(0, self.flat_u).view(B, T - k, hd)
        self.sin_u = sin.index_select(0, self.flat_u).view(B, T - k, hd)
        self.allowed_s = _query_mask(attention_mask, sel, T, window, dtype)
        self._uns = uns
        self._allowed_u = None

    @property
    def allowed_u(self) -> "torch.Tensor":
        """The unselected queries' mask (built on first use: only the non-exact split attends for them)."""
        if self._allowed_u is None:
            self._allowed_u = _query_mask(self.attention_mask, self._uns, self.mask.shape[1], self.window,
                                          self.dtype)
        return self._allowed_u

    def matches(self, mask: "torch.Tensor", position_embeddings: tuple, attention_mask: Any, window: Any,
                dtype: "torch.dtype") -> bool:
        same = lambda a, b: a is b or (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)  # noqa: E731
                                       and a.shape == b.shape and a.device == b.device and torch.equal(a, b))
        return (self.mask is mask or same(self.mask, mask)) \
            and all(a is b for a, b in zip(self.position_embeddings, position_embeddings)) \
            and self.attention_mask is attention_mask and self.window == window and self.dtype == dtype


def _query_mask(attention_mask: Any, pos: "torch.Tensor", T: int, window: Any,
                dtype: "torch.dtype") -> "torch.Tensor":
    """The additive attention mask (B, 1 or heads, n, T), contiguous in ``dtype``, of the queries at positions
    ``pos`` (B, n): the rows of the model's 4-D mask at those positions, or causal by position (within the
    sliding ``window`` when the block has one) when the model passes None.

    One mask for all the blocks that share the set: the attention kernel saves it for backward, once. A boolean
    mask becomes 0 / -inf, as ``scaled_dot_product_attention`` converts it itself (a query with no allowed key
    then gets zeros, as with the dense block's boolean mask); an additive mask is taken as it is."""
    if attention_mask is None:
        allowed = causal_allowed(pos, T)
        if window is not None:  # transformers' sliding window: the `window` latest keys, the query's own included
            keys = torch.arange(T, device=pos.device)
            allowed = allowed & (keys > pos.unsqueeze(-1) - int(window)).unsqueeze(-3)
        return torch.zeros(allowed.shape, dtype=dtype, device=pos.device).masked_fill(~allowed, float("-inf"))
    m = attention_mask
    if not isinstance(m, torch.Tensor) or m.ndim != 4:
        raise ValueError("TokenDropBlock needs `attention_mask` as None (causal) or a 4-D (B, 1, T, T) mask, as "
                         f"transformers' llama passes it; got {type(m).__name__}"
                         f"{'' if not isinstance(m, torch.Tensor) else ' of shape ' + str(tuple(m.shape))}")
    m = m[..., :T]
    B, n = pos.shape
    m = m.expand(B, m.shape[1], m.shape[2], T)
    rows = torch.gather(m, 2, pos[:, None, :, None].expand(B, m.shape[1], n, T))
    if rows.dtype == torch.bool:
        return torch.zeros(rows.shape, dtype=dtype, device=rows.device).masked_fill(~rows, float("-inf"))
    return rows.to(dtype).contiguous()


def _sliding_window(block: "nn.Module") -> Any:
    """The block's sliding attention window (transformers: ``self_attn.sliding_window``, or Mistral's
    ``self_attn.config.sliding_window``), None without one."""
    attn = block.self_attn
    if hasattr(attn, "sliding_window"):
        w = attn.sliding_window
    else:
        w = getattr(getattr(attn, "config", None), "sliding_window", None)
    return None if w is None else int(w)


def _cached_length(cache: Any, block: "nn.Module") -> int:
    """Tokens a key/value cache already holds for this block (-1 when unknown: the block then runs dense)."""
    try:
        return int(cache.get_seq_length(getattr(block.self_attn, "layer_idx", 0)))
    except Exception:  # noqa: BLE001 - a cache we do not know
        return -1


def _without_cache(kwargs: dict) -> dict:
    out = dict(kwargs)
    for key in ("past_key_values", "past_key_value"):
        if key in out:
            out[key] = None
    if "use_cache" in out:
        out["use_cache"] = False
    return out


def _wrapped_attribute(wrapper: "nn.Module", name: str) -> Any:
    """What a wrapper does not have itself, read from its wrapped block (transformers reads attributes of the
    decoder layers it calls, Qwen2's ``attention_type`` say). Looked up only after nn.Module's own lookup of
    parameters, buffers and submodules failed; never for dunder names (copy and pickle probe those on objects
    whose ``__init__`` has not run) nor for ``block`` itself, so that it cannot recurse."""
    modules = wrapper.__dict__.get("_modules")
    block = modules.get("block") if modules is not None else None
    if block is None or name == "block" or (name.startswith("__") and name.endswith("__")):
        raise AttributeError(f"'{type(wrapper).__name__}' object has no attribute '{name}'")
    try:
        return getattr(block, name)
    except AttributeError:
        raise AttributeError(f"'{type(wrapper).__name__}' object has no attribute '{name}' (nor has its wrapped "
                             f"block, a {type(block).__name__})") from None


def _keep_state_dict_keys(wrapper: "nn.Module") -> None:
    """The wrapper's state_dict has the wrapped block's keys (no ``block.`` level), and loads them back, so a
    wrapped model saves and loads checkpoints of the plain model."""

    def save(module: Any, state_dict: dict, prefix: str, local_metadata: Any) -> None:
        inner = prefix + "block."
        for key in [k for k in state_dict if k.startswith(inner)]:
            state_dict[prefix + key[len(inner):]] = state_dict.pop(key)

    def load(module: Any, state_dict: dict, prefix: str, *args: Any) -> None:
        inner = prefix + "block."
        for key in [k for k in state_dict if k.startswith(prefix) and not k.startswith(inner)]:
            state_dict[inner + key[len(prefix):]] = state_dict.pop(key)

    wrapper.register_state_dict_post_hook(save)
    wrapper.register_load_state_dict_pre_hook(load)


# --------------------------------------------------------------------------------------------------
# LayerDropBlock (DropBP's layer-level skipping, the baseline)
# --------------------------------------------------------------------------------------------------
@constraints(block="any", rho="prob", skip="option", rng="rng")
class LayerDropBlock(nn.Module):
    """A decoder block whose backward pass is skipped at random, as a whole (DropBP's layer-level rule).

    DropBP (Woo et al., 2024) drops the backward pass of a residual branch with a drop rate ``p``: the branch
    output is detached, so the gradient passes the block through the residual connection only. Here the whole
    block is one branch, kept with probability ``rho = 1 - p`` in each training forward.

    Parameters
    ----------
    block : nn.Module
        A decoder block (any module mapping hidden states to hidden states of the same shape, returned alone or
        first in a tuple).
    rho : float, default 0.5
        Probability in (0, 1] that a training forward keeps the block's backward pass (DropBP's drop rate is
        ``1 - rho``).
    skip : {'no_grad', 'detach'}, default 'no_grad'
        How a dropped block runs. ``'no_grad'``: under ``torch.no_grad()``, so nothing is saved for backward.
        ``'detach'``: DropBP's published form, the block run with autograd and its update detached: the
        graph is built and its tensors are saved during the forward (freed only when the block returns), so the
        activation memory measured during the forward does not fall. The values and gradients are the same.
    rng : None, int, numpy.random.Generator or torch.Generator, optional
        Draws the keep/drop decisions.

    Attributes
    ----------
    last_kept : bool or None
        Whether the last training forward kept the backward pass (None before the first).

    Attributes that the wrapper does not have are read from the wrapped block.

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.tokendrop import LayerDropBlock
    >>> block = LayerDropBlock(torch.nn.Linear(4, 4), rho=0.5, rng=0)
    >>> x = torch.randn(3, 4, requires_grad=True)
    >>> kept = []
    >>> for _ in range(4):
    ...     _ = block(x)
    ...     kept.append(block.last_kept)
    >>> kept
    [True, False, True, True]
    """

    def __init__(self, block: "nn.Module", *, rho: float = 0.5, skip: str = "no_grad", rng: Any = None) -> None:
        if not isinstance(block, nn.Module):
            raise TypeError(f"`block` must be a torch.nn.Module; got {type(block).__name__}")
        rho = _check_rho(rho)
        skip = check_option(skip, "skip", _SKIPS)
        gen = torch_generator(rng)
        super().__init__()
        self.block = block
        self.rho = rho
        self.skip = skip
        self.last_kept = None
        self._gen = gen
        _keep_state_dict_keys(self)

    def extra_repr(self) -> str:
        return f"rho={self.rho}, skip={self.skip!r}"

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            return _wrapped_attribute(self, name)

    @constraints(hidden_states="tensor")
    def forward(self, hidden_states: "torch.Tensor", *args: Any, **kwargs: Any) -> Any:
        """The block's output; in training, its backward pass is dropped with probability ``1 - rho``.

        Parameters
        ----------
        hidden_states : torch.Tensor
            The block's input hidden states.
        *args, **kwargs
            The wrapped block's other arguments.

        Returns
        -------
        object
            What the wrapped block returns (the values are the block's in every case).
        """
        check_tensor(hidden_states, "hidden_states", finite=False)  # no NaN scan: a pass and a sync per block
        if not (self.training and torch.is_grad_enabled()):
            return self.block(hidden_states, *args, **kwargs)
        keep = bool(torch.rand((), generator=self._gen) < self.rho)
        self.last_kept = keep
        if keep:
            return self.block(hidden_states, *args, **kwargs)
        if self.skip == "no_grad":
            with torch.no_grad():
                out = self.block(hidden_states, *args, **kwargs)
        else:
            out = self.block(hidden_states, *args, **kwargs)
        h = _first(out)
        if h.shape != hidden_states.shape:
            raise ValueError(f"`block` must return hidden states of the input's shape {tuple(hidden_states.shape)} "
                             f"to be skipped through its residual connection; got {tuple(h.shape)}")
        return _rewrap(out, _ReplaceValue.apply(hidden_states, h))


# --------------------------------------------------------------------------------------------------
# model wrappers
# --------------------------------------------------------------------------------------------------
def _decoder_layers(model: Any) -> "nn.ModuleList":
    if not isinstance(model, nn.Module):
        raise TypeError(f"`model` must be a torch.nn.Module; got {type(model).__name__}")
    inner = getattr(model, "model", None)
    layers = getattr(inner, "layers", None) if isinstance(inner, nn.Module) else None
    if layers is None:
        layers = getattr(model, "layers", None)
    if not isinstance(layers, nn.ModuleList) or len(layers) == 0:
        raise ValueError("`model` must hold its decoder blocks in `model.model.layers` (transformers' "
                         "LlamaForCausalLM, TinyLlamaForCausalLM) or `model.layers` (LlamaModel), a non-empty "
                         "nn.ModuleList")
    return layers


def _per_layer(rho: Any, L: int) -> list[float]:
    if isinstance(rho, (list, tuple, np.ndarray)) or (isinstance(rho, torch.Tensor) and rho.ndim > 0):
        if isinstance(rho, torch.Tensor):
            rho = rho.detach().cpu().numpy()
        try:
            values = np.asarray(rho)
        except ValueError:  # ragged
            raise ValueError("`rho` as a sequence must be a flat list of keep ratios") from None
        if values.ndim != 1 or values.dtype.kind not in "fiu":
            raise ValueError(f"`rho` as a sequence must be a flat list of real keep ratios; got shape "
                             f"{values.shape} of dtype {values.dtype}")
        if len(values) != L:
            raise ValueError(f"`rho` as a sequence must hold one keep ratio per decoder block ({L}); got "
                             f"{len(values)}")
        return [_check_rho(float(r), "rho") for r in values]
    return [_check_rho(rho)] * L


@constraints(model="any", rho=("prob", "array1d"), lazy_layers=("int>=0", "option"), mode="option", exact="bool",
             rng="rng")
def wrap_model(model: "nn.Module", rho: Any = 0.5, lazy_layers: int | None = None, *, mode: str = "tokendrop",
               exact: bool = True, rng: Any = None) -> "nn.Module":
    """Wrap the decoder blocks of a llama-layout model for TokenDrop (or DropBP's layer skipping), in place.

    Parameters
    ----------
    model : nn.Module
        A model with its decoder blocks in ``model.model.layers`` (transformers' ``LlamaForCausalLM``,
        :class:`TinyLlamaForCausalLM`) or ``model.layers``.
    rho : float or sequence of float, default 0.5
        Keep ratio in (0, 1]: for ``'tokendrop'`` the fraction of tokens backpropagated, for ``'layerdrop'`` the
        probability of keeping a block's backward pass. A sequence gives one value per block (entries of the
        lazy blocks are not used); for ``'tokendrop'`` it must not decrease with depth (nesting).
    lazy_layers : int or None, default None
        ``'tokendrop'``: the first ``lazy_layers`` blocks run dense and only score; the set is chosen by the
        cumulative scores once they have run (None: a quarter of the blocks, rounded down). ``'layerdrop'``:
        the first ``lazy_layers`` blocks are never dropped (None: 0).
    mode : {'tokendrop', 'layerdrop'}, default 'tokendrop'
        ``'tokendrop'`` wraps each block in a :class:`TokenDropBlock`, ``'layerdrop'`` in a
        :class:`LayerDropBlock` (the baseline).
    exact : bool, default True
        ``'tokendrop'`` only: True, forward values bit-identical to the dense model's (at the cost of one more
        forward of the selected tokens); False, the faster split, equal to the dense model up to rounding. See
        :class:`TokenDropBlock`.
    rng : None, int, numpy.random.Generator or torch.Generator, optional
        ``'layerdrop'`` only: draws the keep/drop decisions (one generator for all blocks).

    Returns
    -------
    nn.Module
        ``model`` itself, its blocks wrapped. :func:`unwrap_model` puts the original blocks back. The wrappers
        keep the blocks' ``state_dict`` keys, so checkpoints load either way.

    Notes
    -----
    Reconstructed (see :class:`TokenDropBlock`). The blocks of one model share one selection state: the
    first block resets it at each forward, each block reads the cumulative scores of the blocks before it
    and the set of the previous one, and the last block drops it (the gathered masks and rotary tables, and
    the model's own 4-D mask it refers to, are not held between steps). Inspect the sets after a forward with
    ``[b.last_mask for b in model.model.layers]``.

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.tokendrop import (TinyLlamaConfig, TinyLlamaForCausalLM, apply_lora, copy_task,
    ...                                    lm_loss, unwrap_model, wrap_model)
    >>> model = apply_lora(TinyLlamaForCausalLM(TinyLlamaConfig(num_hidden_layers=4), rng=0), rng=0)
    >>> ids, labels = copy_task(2, 16, 32, rng=0)
    >>> dense = model(ids)
    >>> _ = wrap_model(model, rho=0.25, lazy_layers=1)
    >>> logits = model(ids)
    >>> torch.equal(logits, dense)
    True
    >>> [None if b.last_mask is None else int(b.last_mask[0].sum()) for b in model.model.layers]
    [None, 4, 4, 4]
    >>> lm_loss(logits, labels).backward()
    >>> type(unwrap_model(model).model.layers[0]).__name__
    'TinyLlamaDecoderLayer'
    """
    layers = _decoder_layers(model)
    mode = check_option(mode, "mode", _MODES)
    exact = check_bool(exact, "exact")
    gen = torch_generator(rng)  # checked whatever the mode
    L = len(layers)
    if any(isinstance(b, (TokenDropBlock, LayerDropBlock)) for b in layers):
        raise ValueError("`model` is already wrapped; call unwrap_model(model) first")
    if lazy_layers is None:
        lazy_layers = L // 4 if mode == "tokendrop" else 0
    lazy_layers = check_int(lazy_layers, "lazy_layers", minimum=0, maximum=2**31 - 1)
    if lazy_layers > L:
        raise ValueError(f"`lazy_layers` must be at most the number of decoder blocks ({L}); got {lazy_layers}")
    rhos = _per_layer(rho, L)
    if mode == "tokendrop":
        for i, b in enumerate(layers):
            _check_block(b, f"model.model.layers[{i}]")
        selecting = rhos[lazy_layers:]
        if any(b < a for a, b in zip(selecting, selecting[1:])):
            raise ValueError(f"`rho` must not decrease with depth over the selecting blocks (the set of a deeper "
                             f"block contains the shallower one's); got {selecting}")
        state = _State()
        for i in range(L):
            wrapper = TokenDropBlock(layers[i], rho=rhos[i], lazy_layers=lazy_layers, exact=exact)
            wrapper._depth = i
            wrapper._last = i == L - 1
            wrapper._state = state
            layers[i] = wrapper
    else:
        for i in range(L):  # one generator for all the blocks
            layers[i] = LayerDropBlock(layers[i], rho=1.0 if i < lazy_layers else rhos[i], rng=gen)
    return model


@constraints(model="any")
def unwrap_model(model: "nn.Module") -> "nn.Module":
    """Undo :func:`wrap_model`: put the original decoder blocks back, in place.

    Parameters
    ----------
    model : nn.Module
        A model given to :func:`wrap_model` (a model that is not wrapped is returned unchanged).

    Returns
    -------
    nn.Module
        ``model`` itself.

    Examples
    --------
    >>> from numtk.torch.tokendrop import TinyLlamaConfig, TinyLlamaForCausalLM, unwrap_model, wrap_model
    >>> model = wrap_model(TinyLlamaForCausalLM(TinyLlamaConfig(num_hidden_layers=2), rng=0))
    >>> type(model.model.layers[0]).__name__
    'TokenDropBlock'
    >>> type(unwrap_model(model).model.layers[0]).__name__
    'TinyLlamaDecoderLayer'
    """
    layers = _decoder_layers(model)
    for i, b in enumerate(layers):
        if isinstance(b, (TokenDropBlock, LayerDropBlock)):
            layers[i] = b.block
    return model


# --------------------------------------------------------------------------------------------------
# measuring saved activations
# --------------------------------------------------------------------------------------------------
@constraints(fn="callable")
def saved_activation_bytes(fn: Callable, *args: Any, **kwargs: Any) -> int:
    """Bytes of the tensors autograd saves for backward while ``fn(*args, **kwargs)`` runs.

    Every tensor an operation saves for its backward pass goes through the pack hook of
    :func:`torch.autograd.graph.saved_tensors_hooks`; this sums the sizes of their storages, each storage
    once (views, and a tensor saved by several operations, count once). Parameters (``nn.Parameter`` and
    views of them, saved by linear layers for the input gradient) are not activations and are left out. The
    count includes tensors saved by a graph that is freed before ``fn`` returns (a branch computed with
    autograd and then detached): they were saved, and held memory, during the forward.

    The graph built inside ``fn`` stays usable: ``fn`` may return the loss and the caller call ``backward`` on
    it, with the same first-order gradients. (Each saved tensor is kept as a detached alias of itself, so a
    second-order backward, ``create_graph=True``, does not see through the saved tensors.)

    Parameters
    ----------
    fn : callable
        Runs the forward pass (typically returns the loss); it is called once.
    *args, **kwargs
        Its arguments.

    Returns
    -------
    int
        Bytes.

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.tokendrop import saved_activation_bytes
    >>> w = torch.nn.Parameter(torch.randn(8, 8))
    >>> x = torch.randn(4, 8, requires_grad=True)
    >>> saved_activation_bytes(lambda: torch.tanh(x @ w).sum())  # x (128 B) and tanh's output (128 B)
    256
    >>> with torch.no_grad():
    ...     saved_activation_bytes(lambda: torch.tanh(x @ w).sum())
    0
    """
    if not callable(fn):
        raise TypeError(f"`fn` must be callable; got {type(fn).__name__}")
    seen: dict = {}

    def pack(t: "torch.Tensor") -> "torch.Tensor":
        # a detached alias is saved: returning ``t`` itself would tie an op's saved output to its own grad_fn in a
        # reference cycle that Python's collector cannot see (the graph, and its memory, would never be freed)
        alias = t.detach()
        base = getattr(t, "_base", None)  # torch's base tensor of a view (it has no public accessor)
        if isinstance(t, nn.Parameter) or isinstance(base, nn.Parameter):
            return alias
        storage = t.untyped_storage()
        key = (str(t.device), storage.data_ptr())
        if key not in seen:
            seen[key] = (storage.nbytes(), alias)  # held until the end: no address is reused while counting
        return alias

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn(*args, **kwargs)
    total = sum(n for n, _ in seen.values())
    seen.clear()
    return int(total)
