"""A tiny llama-layout causal language model in pure torch, with Hugging Face's module names and math.

``TinyLlamaForCausalLM`` has the attribute layout of transformers' ``LlamaForCausalLM`` (``model.embed_tokens``,
``model.layers[i].input_layernorm``, ``.self_attn.{q,k,v,o}_proj``, ``.post_attention_layernorm``,
``.mlp.{gate,up,down}_proj``, ``model.norm``, ``lm_head``), so its ``state_dict`` loads into a
``LlamaForCausalLM`` of the same configuration and back, and code written for one (TokenDrop's wrappers, LoRA)
works on the other. The math is Llama's: RMSNorm, rotary position embeddings (RoPE, the rotate-half convention),
grouped-query attention (GQA), a SwiGLU MLP, optionally tied input and output embeddings.

Attention is :func:`torch.nn.functional.scaled_dot_product_attention`, as in transformers' ``sdpa``
implementation (its fused kernels save no attention probabilities for backward). One deliberate difference:
transformers computes RMSNorm and the RoPE tables in float32 for every dtype (an upcast meant for float16 and
bfloat16, a downcast for float64). Here they run in float32 or the model's dtype, whichever is wider, so that a
float64 model is float64 throughout (the exactness tests need it). In float32 the two models do the same
operations.

The attention helpers (:func:`rope`, :func:`attend`, :func:`causal_allowed`) are shared with TokenDrop's
block, which recomputes a decoder block token-split with the same operations.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from numtk._lib._constraints import constraints
from numtk._lib._validation import check_bool, check_int, check_real
from numtk.torch._common import check_reduction, check_tensor, torch, torch_generator

nn = torch.nn
F = torch.nn.functional

__all__ = ["TinyLlamaConfig", "TinyLlamaForCausalLM", "apply_lora", "copy_task", "lm_loss", "LoRALinear",
           "rope", "attend", "causal_allowed", "compute_dtype"]

#: the label that the loss ignores (transformers' and torch's convention)
IGNORE_INDEX = -100
#: the separator token of the copy task
SEP = 0


def compute_dtype(dtype: "torch.dtype") -> "torch.dtype":
    """The dtype norms and RoPE tables run in: float32, or ``dtype`` when it is wider (float64)."""
    return torch.promote_types(dtype, torch.float32)


# --------------------------------------------------------------------------------------------------
# configuration
# --------------------------------------------------------------------------------------------------
@constraints(vocab_size="count", hidden_size="count", intermediate_size="count", num_hidden_layers="count",
             num_attention_heads="count", num_key_value_heads=("count", "option"), head_dim=("count", "option"),
             rope_theta="real>0", rms_norm_eps="real>0", tie_word_embeddings="bool", initializer_range="real>0")
@dataclass(frozen=True)
class TinyLlamaConfig:
    """The sizes of a :class:`TinyLlamaForCausalLM`, named as in transformers' ``LlamaConfig``.

    Parameters
    ----------
    vocab_size : int, default 32
        Number of tokens.
    hidden_size : int, default 64
        Width of the residual stream.
    intermediate_size : int, default 176
        Width of the SwiGLU MLP.
    num_hidden_layers : int, default 4
        Number of decoder blocks.
    num_attention_heads : int, default 4
        Query heads.
    num_key_value_heads : int or None, default None
        Key/value heads (grouped-query attention); must divide ``num_attention_heads``. None: as many as the
        query heads.
    head_dim : int or None, default None
        Width of one head (even, for RoPE). None: ``hidden_size // num_attention_heads``.
    rope_theta : float, default 10000.0
        Base of the rotary frequencies.
    rms_norm_eps : float, default 1e-6
        The epsilon of RMSNorm.
    tie_word_embeddings : bool, default False
        Share the input embedding with the output head.
    initializer_range : float, default 0.02
        Standard deviation of the normal initialisation of linear and embedding weights.

    Examples
    --------
    >>> from numtk.torch.tokendrop import TinyLlamaConfig
    >>> cfg = TinyLlamaConfig(hidden_size=32, num_attention_heads=4, num_key_value_heads=2)
    >>> cfg.head_dim, cfg.num_key_value_heads
    (8, 2)
    """

    vocab_size: int = 32
    hidden_size: int = 64
    intermediate_size: int = 176
    num_hidden_layers: int = 4
    num_attention_heads: int = 4
    num_key_value_heads: int | None = None
    head_dim: int | None = None
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-6
    tie_word_embeddings: bool = False
    initializer_range: float = 0.02

    def __post_init__(self) -> None:
        fix = lambda name, value: object.__setattr__(self, name, value)  # noqa: E731 - frozen dataclass
        for name in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads"):
            fix(name, check_int(getattr(self, name), name, minimum=1, maximum=2**31 - 1))
        heads = self.num_attention_heads
        kv = self.num_key_value_heads
        kv = heads if kv is None else check_int(kv, "num_key_value_heads", minimum=1, maximum=2**31 - 1)
        if heads % kv:
            raise ValueError(f"`num_key_value_heads` must divide num_attention_heads = {heads}; got {kv}")
        fix("num_key_value_heads", kv)
        if self.head_dim is None:
            if self.hidden_size % heads:
                raise ValueError(f"`num_attention_heads` must divide hidden_size = {self.hidden_size} when head_dim "
                                 f"is None; got {heads}")
            hd = self.hidden_size // heads
        else:
            hd = check_int(self.head_dim, "head_dim", minimum=1, maximum=2**31 - 1)
        if hd % 2:
            raise ValueError(f"`head_dim` must be even (rotary embeddings rotate pairs); got {hd}")
        fix("head_dim", hd)
        fix("rope_theta", check_real(self.rope_theta, "rope_theta", low=0.0, low_open=True))
        fix("rms_norm_eps", check_real(self.rms_norm_eps, "rms_norm_eps", low=0.0, low_open=True))
        fix("initializer_range", check_real(self.initializer_range, "initializer_range", low=0.0, low_open=True))
        fix("tie_word_embeddings", check_bool(self.tie_word_embeddings, "tie_word_embeddings"))


# --------------------------------------------------------------------------------------------------
# shared math
# --------------------------------------------------------------------------------------------------
def _rotate_half(x: "torch.Tensor") -> "torch.Tensor":
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rope(x: "torch.Tensor", cos: "torch.Tensor", sin: "torch.Tensor") -> "torch.Tensor":
    """Rotary embedding of token-major ``x`` (B, T, heads, head_dim) with ``cos``, ``sin`` (B, T, head_dim):
    ``x cos + rotate_half(x) sin``, element by element (the same floats as transformers' head-major layout)."""
    cos = cos.unsqueeze(2)
    sin = sin.unsqueeze(2)
    return x * cos + _rotate_half(x) * sin


def causal_allowed(q_pos: "torch.Tensor", n_keys: int) -> "torch.Tensor":
    """Boolean (..., 1, Tq, n_keys): key position <= query position, for queries at positions ``q_pos``
    (..., Tq) (an int tensor) and keys at positions 0 .. n_keys - 1."""
    keys = torch.arange(n_keys, device=q_pos.device)
    return (keys <= q_pos.unsqueeze(-1)).unsqueeze(-3)


def attend(q: "torch.Tensor", k: "torch.Tensor", v: "torch.Tensor", mask: "torch.Tensor | None",
           scaling: float) -> "torch.Tensor":
    """Grouped-query attention of token-major queries ``q`` (B, Tq, H, hd) over ``k``, ``v`` (B, Tk, Hkv, hd).

    Computed by :func:`torch.nn.functional.scaled_dot_product_attention` (as transformers' ``sdpa`` attention):
    its fused kernels save the queries, keys, values, output and row log-sum-exps for backward, never the
    (Tq, Tk) probabilities. ``mask`` is None (causal, ``Tq == Tk``), boolean (True: attend; broadcastable to
    (B, 1 or H, Tq, Tk)) or additive (float). The masks keep the conventions of transformers' two attentions: a
    query with no allowed key gets zeros under a boolean mask (``sdpa``) and the average of all values under an
    additive mask of the most negative float (``eager``). Key/value head ``j`` serves query heads
    ``j * H / Hkv`` to ``(j + 1) * H / Hkv - 1`` (transformers' ``repeat_kv``). Returns (B, Tq, H * hd).
    """
    B, Tq, H, hd = q.shape
    Hkv = k.shape[2]
    q = q.transpose(1, 2)
    k = k.transpose(1, 2)
    v = v.transpose(1, 2)
    extra: dict = {}
    if H != Hkv:
        if q.device.type == "cpu":  # the CPU kernel reads each key/value head for its query heads
            extra["enable_gqa"] = True
        else:  # other backends' memory-efficient kernels want as many key/value heads as query heads
            k = k.repeat_interleave(H // Hkv, dim=1)
            v = v.repeat_interleave(H // Hkv, dim=1)
    if mask is None:
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scaling, **extra)
    else:
        if mask.dtype != torch.bool:
            mask = mask.to(q.dtype)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scaling, **extra)
    return out.transpose(1, 2).reshape(B, Tq, H * hd)


# --------------------------------------------------------------------------------------------------
# the model
# --------------------------------------------------------------------------------------------------
class TinyLlamaRMSNorm(nn.Module):
    """RMSNorm: ``weight * x / sqrt(mean(x^2) + eps)``, computed in :func:`compute_dtype`."""

    def __init__(self, hidden_size: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states: "torch.Tensor") -> "torch.Tensor":
        dtype = hidden_states.dtype
        h = hidden_states.to(compute_dtype(dtype))
        variance = h.pow(2).mean(-1, keepdim=True)
        h = h * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * h.to(dtype)


class TinyLlamaRotaryEmbedding(nn.Module):
    """The cos and sin tables of RoPE for positions (B, T): each (B, T, head_dim), in the dtype of ``x``."""

    def __init__(self, head_dim: int, theta: float) -> None:
        super().__init__()
        self.head_dim = head_dim
        self.theta = theta

    def forward(self, x: "torch.Tensor", position_ids: "torch.Tensor") -> tuple:
        dt = compute_dtype(x.dtype)
        exponent = torch.arange(0, self.head_dim, 2, dtype=torch.int64, device=x.device).to(dt) / self.head_dim
        inv_freq = 1.0 / (self.theta ** exponent)
        freqs = position_ids.to(dt)[..., None] * inv_freq
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


class TinyLlamaAttention(nn.Module):
    """Causal grouped-query self-attention with RoPE (transformers' ``LlamaAttention`` names)."""

    def __init__(self, config: TinyLlamaConfig, layer_idx: int = 0) -> None:
        super().__init__()
        self.layer_idx = layer_idx
        self.head_dim = config.head_dim
        self.num_heads = config.num_attention_heads
        self.num_key_value_heads = config.num_key_value_heads
        self.num_key_value_groups = self.num_heads // self.num_key_value_heads
        self.scaling = self.head_dim ** -0.5
        self.attention_dropout = 0.0
        d, hd = config.hidden_size, self.head_dim
        self.q_proj = nn.Linear(d, self.num_heads * hd, bias=False)
        self.k_proj = nn.Linear(d, self.num_key_value_heads * hd, bias=False)
        self.v_proj = nn.Linear(d, self.num_key_value_heads * hd, bias=False)
        self.o_proj = nn.Linear(self.num_heads * hd, d, bias=False)

    def forward(self, hidden_states: "torch.Tensor", position_embeddings: tuple,
                attention_mask: "torch.Tensor | None" = None) -> "torch.Tensor":
        B, T, _ = hidden_states.shape
        cos, sin = position_embeddings
        q = rope(self.q_proj(hidden_states).view(B, T, self.num_heads, self.head_dim), cos, sin)
        k = rope(self.k_proj(hidden_states).view(B, T, self.num_key_value_heads, self.head_dim), cos, sin)
        v = self.v_proj(hidden_states).view(B, T, self.num_key_value_heads, self.head_dim)
        return self.o_proj(attend(q, k, v, attention_mask, self.scaling))


class TinyLlamaMLP(nn.Module):
    """SwiGLU: ``down_proj(silu(gate_proj(x)) * up_proj(x))``."""

    def __init__(self, config: TinyLlamaConfig) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.up_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.down_proj = nn.Linear(config.intermediate_size, config.hidden_size, bias=False)

    def forward(self, x: "torch.Tensor") -> "torch.Tensor":
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class TinyLlamaDecoderLayer(nn.Module):
    """One pre-norm decoder block: ``y = x + attn(norm(x))``, ``out = y + mlp(norm(y))``.

    Called like transformers' ``LlamaDecoderLayer``: ``layer(hidden_states, attention_mask=None,
    position_embeddings=(cos, sin), **ignored)``; returns the new hidden states.
    """

    def __init__(self, config: TinyLlamaConfig, layer_idx: int = 0) -> None:
        super().__init__()
        self.hidden_size = config.hidden_size
        self.self_attn = TinyLlamaAttention(config, layer_idx)
        self.mlp = TinyLlamaMLP(config)
        self.input_layernorm = TinyLlamaRMSNorm(config.hidden_size, config.rms_norm_eps)
        self.post_attention_layernorm = TinyLlamaRMSNorm(config.hidden_size, config.rms_norm_eps)

    def forward(self, hidden_states: "torch.Tensor", attention_mask: "torch.Tensor | None" = None,
                position_embeddings: tuple | None = None, **kwargs: Any) -> "torch.Tensor":
        if position_embeddings is None:
            raise ValueError("`position_embeddings` must be the (cos, sin) tables of the model's rotary embedding")
        a = self.self_attn(self.input_layernorm(hidden_states), position_embeddings, attention_mask)
        y = hidden_states + a
        return y + self.mlp(self.post_attention_layernorm(y))


class TinyLlamaModel(nn.Module):
    """The decoder stack: ``embed_tokens``, ``layers``, ``norm`` (and the rotary tables)."""

    def __init__(self, config: TinyLlamaConfig) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList([TinyLlamaDecoderLayer(config, i) for i in range(config.num_hidden_layers)])
        self.norm = TinyLlamaRMSNorm(config.hidden_size, config.rms_norm_eps)
        self.rotary_emb = TinyLlamaRotaryEmbedding(config.head_dim, config.rope_theta)

    def forward(self, input_ids: "torch.Tensor") -> "torch.Tensor":
        h = self.embed_tokens(input_ids)
        positions = torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0)
        cos_sin = self.rotary_emb(h, positions)
        for layer in self.layers:
            h = layer(h, attention_mask=None, position_embeddings=cos_sin)
        return self.norm(h)


@constraints(config="any", rng="rng")
class TinyLlamaForCausalLM(nn.Module):
    """A tiny llama-layout causal language model (transformers' ``LlamaForCausalLM`` layout and math).

    Parameters
    ----------
    config : TinyLlamaConfig
        The sizes.
    rng : None, int, numpy.random.Generator or torch.Generator, optional
        Draws the initial weights: linear and embedding weights normal with standard deviation
        ``config.initializer_range`` (transformers' initialisation), norm weights one.

    Attributes
    ----------
    model : nn.Module
        ``embed_tokens``, ``layers`` (an ``nn.ModuleList`` of decoder blocks) and ``norm``.
    lm_head : nn.Linear
        The output head (its weight is the embedding's when ``config.tie_word_embeddings``).

    Notes
    -----
    The ``state_dict`` has transformers' keys: ``LlamaForCausalLM(LlamaConfig(...same sizes...,
    attention_bias=False, mlp_bias=False)).load_state_dict(tiny.state_dict())`` gives the same logits (to the
    float32 rounding of transformers' RMSNorm and RoPE tables, see the module's notes).

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.tokendrop import TinyLlamaConfig, TinyLlamaForCausalLM
    >>> model = TinyLlamaForCausalLM(TinyLlamaConfig(num_hidden_layers=2), rng=0)
    >>> model(torch.zeros(3, 10, dtype=torch.long)).shape
    torch.Size([3, 10, 32])
    >>> len(model.model.layers)
    2
    """

    def __init__(self, config: TinyLlamaConfig, *, rng: Any = None) -> None:
        super().__init__()
        if not isinstance(config, TinyLlamaConfig):
            raise TypeError(f"`config` must be a TinyLlamaConfig; got {type(config).__name__}")
        gen = torch_generator(rng)
        self.config = config
        self.model = TinyLlamaModel(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        with torch.no_grad():
            for module in self.modules():
                if isinstance(module, (nn.Linear, nn.Embedding)):
                    module.weight.copy_(torch.randn(module.weight.shape, generator=gen) * config.initializer_range)
        if config.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight

    @constraints(input_ids="tensor")
    def forward(self, input_ids: "torch.Tensor") -> "torch.Tensor":
        """The next-token logits.

        Parameters
        ----------
        input_ids : torch.Tensor
            (batch, length) integer tokens in ``[0, vocab_size)``.

        Returns
        -------
        torch.Tensor
            (batch, length, vocab_size) logits, in the model's dtype.
        """
        check_tensor(input_ids, "input_ids", ndim=2, dtype="integer")
        if input_ids.numel() and (int(input_ids.min()) < 0 or int(input_ids.max()) >= self.config.vocab_size):
            raise ValueError(f"`input_ids` must lie in [0, {self.config.vocab_size}); got values in "
                             f"[{int(input_ids.min())}, {int(input_ids.max())}]")
        if input_ids.shape[1] == 0:
            raise ValueError("`input_ids` must hold at least one token per sequence; got length 0")
        return self.lm_head(self.model(input_ids))


# --------------------------------------------------------------------------------------------------
# LoRA
# --------------------------------------------------------------------------------------------------
class LoRALinear(nn.Module):
    """A frozen linear layer plus a trainable low-rank update: ``base(x) + (alpha / r) B A x``.

    ``lora_A`` (r, in) starts as ``nn.Linear``'s default draw, ``lora_B`` (out, r) at zero, so the layer starts
    equal to ``base``.
    """

    def __init__(self, base: "nn.Linear", r: int, alpha: float, gen: "torch.Generator") -> None:
        super().__init__()
        self.base_layer = base
        self.r = r
        self.scaling = alpha / r
        bound = 1.0 / math.sqrt(base.in_features)
        a = (torch.rand((r, base.in_features), generator=gen, dtype=torch.float64) * 2 - 1) * bound
        p = base.weight
        self.lora_A = nn.Parameter(a.to(device=p.device, dtype=p.dtype))
        self.lora_B = nn.Parameter(torch.zeros((base.out_features, r), device=p.device, dtype=p.dtype))

    @property
    def weight(self) -> "torch.Tensor":
        """The frozen base weight (what code that reads ``proj.weight`` expects)."""
        return self.base_layer.weight

    @property
    def in_features(self) -> int:
        return self.base_layer.in_features

    @property
    def out_features(self) -> int:
        return self.base_layer.out_features

    def forward(self, x: "torch.Tensor") -> "torch.Tensor":
        return self.base_layer(x) + F.linear(F.linear(x, self.lora_A), self.lora_B) * self.scaling

    def extra_repr(self) -> str:
        return f"r={self.r}, scaling={self.scaling:g}"


@constraints(model="any", r="count", alpha="real>0", targets="any", rng="rng")
def apply_lora(model: "nn.Module", r: int = 8, alpha: float = 16.0, targets: Any = ("q_proj", "v_proj"), *,
               rng: Any = None) -> "nn.Module":
    """Freeze ``model`` and give the named linear layers a trainable low-rank update (LoRA), in place.

    Every ``nn.Linear`` whose attribute name is in ``targets`` (anywhere in the model: ``q_proj`` of every
    attention block) becomes ``base(x) + (alpha / r) B A x`` with ``A`` (r, in) drawn like ``nn.Linear``'s
    default weights and ``B`` (out, r) zero; every other parameter gets ``requires_grad = False``. Works on any
    ``nn.Module`` (transformers' ``LlamaForCausalLM`` as well as :class:`TinyLlamaForCausalLM`).

    Parameters
    ----------
    model : nn.Module
        The model, changed in place.
    r : int, default 8
        The rank.
    alpha : float, default 16
        The scale numerator: the update is multiplied by ``alpha / r``.
    targets : str or sequence of str, default ("q_proj", "v_proj")
        Attribute names of the linear layers to adapt.
    rng : None, int, numpy.random.Generator or torch.Generator, optional
        Draws the ``A`` matrices.

    Returns
    -------
    nn.Module
        ``model`` itself. Its trainable parameters are the ``lora_A``, ``lora_B`` pairs.

    Examples
    --------
    >>> from numtk.torch.tokendrop import TinyLlamaConfig, TinyLlamaForCausalLM, apply_lora
    >>> model = apply_lora(TinyLlamaForCausalLM(TinyLlamaConfig(num_hidden_layers=2), rng=0), r=4, rng=0)
    >>> sorted({name.rsplit(".", 1)[-1] for name, p in model.named_parameters() if p.requires_grad})
    ['lora_A', 'lora_B']
    >>> sum(p.numel() for p in model.parameters() if p.requires_grad)
    2048
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"`model` must be a torch.nn.Module; got {type(model).__name__}")
    r = check_int(r, "r", minimum=1, maximum=2**31 - 1)
    alpha = check_real(alpha, "alpha", low=0.0, low_open=True)
    if isinstance(targets, str):
        targets = (targets,)
    if not isinstance(targets, (tuple, list)) or not targets or not all(isinstance(t, str) for t in targets):
        raise TypeError(f"`targets` must be a str or a non-empty sequence of str; got {targets!r}")
    gen = torch_generator(rng)
    found = []
    for _, module in list(model.named_modules()):
        if isinstance(module, LoRALinear):
            continue
        for name, child in list(module.named_children()):
            if name in targets and isinstance(child, nn.Linear):
                found.append((module, name, child))
            elif name in targets and isinstance(child, LoRALinear):
                raise ValueError(f"`model` already has LoRA on {name!r}")
    if not found:
        raise ValueError(f"`targets` {list(targets)} name no nn.Linear of `model`")
    if r > min(min(c.in_features, c.out_features) for _, _, c in found):
        raise ValueError(f"`r` must not exceed the smallest width of the adapted layers; got {r}")
    for p in model.parameters():
        p.requires_grad_(False)
    for module, name, child in found:
        setattr(module, name, LoRALinear(child, r, alpha, gen))
    return model


# --------------------------------------------------------------------------------------------------
# the copy task
# --------------------------------------------------------------------------------------------------
@constraints(batch="count", length="count", vocab="int>=2", rng="rng")
def copy_task(batch: int, length: int, vocab: int, *, rng: Any = None) -> tuple:
    """A batch of the copy task: random symbols, a separator, then the symbols again.

    Each sequence has ``length`` tokens: ``m = length - 1 - n`` symbols drawn uniformly from ``1 .. vocab - 1``,
    the separator ``0``, then the first ``n = (length - 1) // 2`` of the symbols again. The labels follow
    transformers' convention (the loss shifts them, see :func:`lm_loss`): the tokens of the copied part, -100
    (ignored) elsewhere, so that only the copy is scored, and it can only be predicted by attending ``m + 1``
    positions back.

    Parameters
    ----------
    batch : int
        Number of sequences.
    length : int
        Tokens per sequence, at least 3.
    vocab : int
        Vocabulary size, at least 2 (token 0 is the separator).
    rng : None, int, numpy.random.Generator or torch.Generator, optional
        Draws the symbols.

    Returns
    -------
    input_ids : torch.Tensor
        (batch, length) int64 tokens, on the CPU.
    labels : torch.Tensor
        (batch, length) int64: ``input_ids`` on the copied positions, -100 elsewhere.

    Examples
    --------
    >>> from numtk.torch.tokendrop import copy_task
    >>> ids, labels = copy_task(1, 9, 10, rng=0)
    >>> ids[0, :4].tolist() == ids[0, 5:].tolist(), int(ids[0, 4])
    (True, 0)
    >>> labels[0].tolist()[:5]
    [-100, -100, -100, -100, -100]
    """
    batch = check_int(batch, "batch", minimum=1, maximum=2**31 - 1)
    length = check_int(length, "length", minimum=1, maximum=2**31 - 1)
    vocab = check_int(vocab, "vocab", minimum=2, maximum=2**31 - 1)
    if length < 3:
        raise ValueError(f"`length` must be at least 3 (a symbol, the separator, its copy); got {length}")
    if batch * length > 2**31:
        raise ValueError(f"`batch` * `length` must not exceed 2**31 tokens; got {batch} * {length}")
    gen = torch_generator(rng)
    n = (length - 1) // 2
    m = length - 1 - n
    symbols = torch.randint(1, vocab, (batch, m), generator=gen)
    sep = torch.full((batch, 1), SEP, dtype=torch.int64)
    ids = torch.cat([symbols, sep, symbols[:, :n]], dim=1)
    labels = torch.full_like(ids, IGNORE_INDEX)
    labels[:, m + 1:] = ids[:, m + 1:]
    return ids, labels


@constraints(logits="tensor", labels="tensor", reduction="option")
def lm_loss(logits: "torch.Tensor", labels: "torch.Tensor", *, reduction: str = "mean") -> "torch.Tensor":
    """The causal language-modelling loss: cross-entropy of the logits at t against the label at t + 1.

    Parameters
    ----------
    logits : torch.Tensor
        (batch, length, vocab) logits.
    labels : torch.Tensor
        (batch, length) integer labels; -100 is ignored (transformers' convention: the labels are the tokens,
        the shift is done here).
    reduction : {'mean', 'sum', 'none'}, default 'mean'
        The mean over the scored positions, their sum, or the (batch, length - 1) losses (0 where ignored).

    Returns
    -------
    torch.Tensor
        The loss.

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.tokendrop import lm_loss
    >>> labels = torch.tensor([[-100, 2, 1]])
    >>> round(float(lm_loss(torch.zeros(1, 3, 4), labels)), 4)  # uniform over 4 tokens: log 4
    1.3863
    """
    check_tensor(logits, "logits", ndim=3)
    check_tensor(labels, "labels", shape=tuple(logits.shape[:2]), dtype="integer")
    reduction = check_reduction(reduction)
    V = logits.shape[-1]
    target = labels[:, 1:]
    valid = target != IGNORE_INDEX
    if bool(((target < 0) | (target >= V))[valid].any()):
        raise ValueError(f"`labels` must be -100 or lie in [0, {V}) (the vocabulary of `logits`)")
    if logits.shape[1] < 2:
        raise ValueError(f"`logits` must cover at least 2 positions (the loss predicts t + 1 from t); got "
                         f"{logits.shape[1]}")
    losses = F.cross_entropy(logits[:, :-1].reshape(-1, V), target.reshape(-1), ignore_index=IGNORE_INDEX,
                             reduction="none").view(target.shape)
    if reduction == "none":
        return losses
    if reduction == "sum":
        return losses.sum()
    return losses.sum() / valid.sum().clamp(min=1)
