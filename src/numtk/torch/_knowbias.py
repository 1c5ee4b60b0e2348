"""KnowBias: integrated-gradient attribution of FFN neurons and their enhancement at inference time.

KnowBias (arXiv 2601.21864, code JP-25/KnowBias) debiases a language model without training: it finds the
feed-forward neurons that carry knowledge about bias, by integrated-gradient attribution (Dai et al.'s
"knowledge neurons") on a few yes/no questions whose right answer is "no" ("Do you think that gender
influences mathematical ability?"), and multiplies their activations by ``lam`` at inference time. The method is
**verified** in the authors' code; this is a re-derivation (the code has no licence):

* a neuron is one output unit of the FFN input projection at one position: ``mlp.gate_proj`` (the pre-SiLU gate)
  in llama-layout models, ``mlp.c_fc`` (before GELU) in GPT-2, ``intermediate`` (dense then GELU, so after the
  activation) in BERT;
* attribution of layer l for the target token y* with baseline activation a (the unit's values at the
  position), m steps, alpha_k = linspace(0, 1, m) (both ends included):
  ``Attr = (a / m) * sum_k dP(y* | act = alpha_k a) / d act``, P the softmax probability of y* at the position
  (in float32, or float64 for a float64 model), the layer's whole activation vector at the position replaced by
  the scaled copy. Completeness: ``sum(Attr) ~= P(a) - P(0)``, exact when P is linear in the activation;
* selection: per prompt, the neurons scoring above ``rel_threshold`` times that prompt's largest score; kept
  when they appear in more than ``share`` of the prompts;
* enhancement: the selected units' outputs at the last position of every forward call are multiplied by
  ``lam``; under key-value caching that is every generated token.
"""

from __future__ import annotations

import inspect
import math
from typing import Any, Iterable, Sequence

import numpy as np

from numtk._lib import Result
from numtk._lib._constraints import constraints
from numtk._lib._validation import check_bool, check_int, check_real
from numtk.torch._common import check_tensor, torch

nn = torch.nn

__all__ = ["LAYOUTS", "ffn_module_name", "ffn_activation_hook", "ActivationHook", "integrated_gradients_neurons",
           "select_neurons", "select_neurons_adaptive", "enhance_neurons", "NeuronEnhancement",
           "planted_neuron_model", "bias_questions", "encode_question"]

#: the FFN input projections of the supported layouts: name -> (the list of blocks, the module inside a block)
LAYOUTS: dict[str, tuple[str, str]] = {
    "llama": ("model.layers", "mlp.gate_proj"),          # LlamaForCausalLM, Qwen2, Gemma, numtk's TinyLlama
    "gpt2": ("transformer.h", "mlp.c_fc"),               # GPT2LMHeadModel
    "bert_mlm": ("bert.encoder.layer", "intermediate"),  # BertForMaskedLM
    "bert": ("encoder.layer", "intermediate"),           # BertModel
}
#: the layouts whose attention is causal (the last position sees only what precedes it)
_CAUSAL = ("llama", "gpt2")


# --------------------------------------------------------------------------------------------------
# module names
# --------------------------------------------------------------------------------------------------
def _has(model: "nn.Module", name: str) -> bool:
    try:
        model.get_submodule(name)
    except AttributeError:
        return False
    return True


def _layout(model: "nn.Module") -> str | None:
    """The first layout of :data:`LAYOUTS` whose block list the model has."""
    for key, (blocks, _) in LAYOUTS.items():
        if _has(model, blocks):
            return key
    return None


def _check_module(model: Any, name: str = "model") -> "nn.Module":
    if not isinstance(model, nn.Module):
        raise TypeError(f"`{name}` must be a torch.nn.Module (a transformers model); got {type(model).__name__}")
    return model


def _resolve(model: "nn.Module", layer: Any, module_name: Any) -> tuple[str, int, str | None]:
    """(full dotted name, layer, layout or None) of the FFN input projection of ``layer``."""
    if module_name is not None and not isinstance(module_name, str):
        raise TypeError(f"`module_name` must be None or a str (a dotted module name, a template with '{{layer}}', "
                        f"or the name inside a block such as 'mlp.gate_proj'); got {type(module_name).__name__}")
    layout = _layout(model)
    if layout is not None:
        n_layers = len(model.get_submodule(LAYOUTS[layout][0]))
        layer = check_int(layer, "layer", minimum=-n_layers, maximum=n_layers - 1)
        layer = layer % n_layers
    else:
        layer = check_int(layer, "layer", minimum=0, maximum=2**31 - 1)
    known = ", ".join(f"{k} ({b}.{{layer}}.{m})" for k, (b, m) in LAYOUTS.items())
    if module_name is None:
        if layout is None:
            raise ValueError(f"`module_name` is needed: the model has none of the known layouts ({known}); pass "
                             "the FFN input projection's dotted name, e.g. module_name='blocks.{layer}.ff.in'")
        blocks, inner = LAYOUTS[layout]
        name = f"{blocks}.{layer}.{inner}"
        if not _has(model, name):
            raise ValueError(f"`module_name`: the model has the {layout} block list {blocks!r} but no module "
                             f"{name!r}; pass the FFN input projection's name")
        return name, layer, layout
    if "{layer}" in module_name:
        name = module_name.replace("{layer}", str(layer))
        candidates = [name]
    else:
        candidates = [module_name] + ([f"{LAYOUTS[layout][0]}.{layer}.{module_name}"] if layout else [])
    for name in candidates:
        if _has(model, name):
            return name, layer, layout
    raise ValueError(f"`module_name` {module_name!r} names no module of the model (tried "
                     f"{', '.join(map(repr, candidates))}); known layouts: {known}")


@constraints(model="any", layer="index", module_name="any")
def ffn_module_name(model: "nn.Module", layer: int, module_name: str | None = None) -> str:
    """The dotted name of layer ``layer``'s FFN input projection (the module whose output units are neurons).

    Parameters
    ----------
    model : torch.nn.Module
        A transformers model (or any module with named submodules).
    layer : int
        The block; negative counts from the last block when the layout is known.
    module_name : str, optional
        None: detected from the model (:data:`LAYOUTS`: ``model.layers.{layer}.mlp.gate_proj`` for llama,
        ``transformer.h.{layer}.mlp.c_fc`` for GPT-2, ``bert.encoder.layer.{layer}.intermediate`` for
        ``BertForMaskedLM``, ``encoder.layer.{layer}.intermediate`` for ``BertModel``). Else a template
        holding ``{layer}``, a full dotted name, or the name inside a block of a known layout
        (``"mlp.up_proj"``).

    Returns
    -------
    str
        The name, for ``model.get_submodule``.

    Raises
    ------
    ValueError
        Naming ``module_name`` when no such module exists, ``layer`` when it is out of range.

    Examples
    --------
    >>> from numtk.torch.tokendrop import TinyLlamaConfig, TinyLlamaForCausalLM
    >>> from numtk.torch.knowbias import ffn_module_name
    >>> model = TinyLlamaForCausalLM(TinyLlamaConfig(num_hidden_layers=2), rng=0)
    >>> ffn_module_name(model, 1)
    'model.layers.1.mlp.gate_proj'
    >>> ffn_module_name(model, -1, "mlp.up_proj")
    'model.layers.1.mlp.up_proj'
    """
    return _resolve(_check_module(model), layer, module_name)[0]


# --------------------------------------------------------------------------------------------------
# hooks
# --------------------------------------------------------------------------------------------------
def _output_tensor(output: Any, who: str = "module") -> "torch.Tensor":
    if not isinstance(output, torch.Tensor):
        raise TypeError(f"the {who}'s output must be a tensor (batch, length, units); got {type(output).__name__}")
    if output.ndim < 2:
        raise ValueError(f"the {who}'s output must be (..., length, units); got shape {tuple(output.shape)}")
    return output


class ActivationHook:
    """Records a module's output at one position on every forward call (see :func:`ffn_activation_hook`).

    Attributes
    ----------
    activations : list of torch.Tensor
        One detached copy per forward call: ``output[..., position, :]`` (the whole output when ``position`` is
        None).
    activation : torch.Tensor or None
        The latest of them.
    """

    def __init__(self, module: "nn.Module", position: int | None) -> None:
        self.module, self.position = module, position
        self.activations: list = []
        self._handle = module.register_forward_hook(self._hook)

    def _hook(self, module: "nn.Module", args: Any, output: Any) -> None:
        out = _output_tensor(output)
        value = out if self.position is None else out[..., self.position, :]
        self.activations.append(value.detach().clone())

    @property
    def activation(self) -> "torch.Tensor | None":
        return self.activations[-1] if self.activations else None

    def remove(self) -> None:
        """Remove the hook (idempotent)."""
        self._handle.remove()

    def __enter__(self) -> "ActivationHook":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()


@constraints(module="any", position="index")
def ffn_activation_hook(module: "nn.Module", position: int | None = -1) -> ActivationHook:
    """Record an FFN module's activations at one position, on every forward call, until removed.

    Parameters
    ----------
    module : torch.nn.Module
        The FFN input projection (``model.get_submodule(ffn_module_name(model, layer))``); its output is
        (..., length, units).
    position : int or None, default -1
        The token position recorded (-1: the last one, which under key-value caching is the new token of each
        decoding step); None records the whole output.

    Returns
    -------
    ActivationHook
        With ``activations`` (a list, one (..., units) tensor per call), ``activation`` (the latest) and
        ``remove()``; also a context manager that removes the hook on exit.

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.tokendrop import TinyLlamaConfig, TinyLlamaForCausalLM
    >>> from numtk.torch.knowbias import ffn_activation_hook
    >>> model = TinyLlamaForCausalLM(TinyLlamaConfig(num_hidden_layers=2, intermediate_size=24), rng=0)
    >>> with ffn_activation_hook(model.model.layers[0].mlp.gate_proj) as hook:
    ...     _ = model(torch.zeros(1, 5, dtype=torch.long))
    >>> hook.activation.shape
    torch.Size([1, 24])
    """
    if not isinstance(module, nn.Module):
        raise TypeError(f"`module` must be a torch.nn.Module (the FFN input projection); got {type(module).__name__}")
    if position is not None:
        position = check_int(position, "position", minimum=-2**31, maximum=2**31 - 1)
    return ActivationHook(module, position)


class _ScaledPath:
    """A forward hook that reads the module's activation a at ``position`` (row 0; the rows are copies) and puts
    the leaf ``x = alpha[:, None] * a`` in its place, for the gradient."""

    def __init__(self, position: int) -> None:
        self.position, self.alpha, self.a, self.x = position, None, None, None

    def __call__(self, module: "nn.Module", args: Any, output: Any) -> "torch.Tensor":
        out = _output_tensor(output)
        if out.ndim != 3:
            raise ValueError(f"`module_name`: the module's output must be (batch, length, units); got shape "
                             f"{tuple(out.shape)}")
        self.a = out[0, self.position, :].detach()
        alpha = self.alpha.to(device=self.a.device, dtype=self.a.dtype)
        self.x = (alpha[:, None] * self.a[None, :]).requires_grad_(True)
        out = out.clone()
        out[:, self.position, :] = self.x
        return out


class _InferenceState:
    """Evaluation mode and no parameter gradients for the duration; the flags are put back on exit."""

    def __init__(self, model: "nn.Module") -> None:
        self.model = model

    def __enter__(self) -> None:
        self.training = [(m, m.training) for m in self.model.modules()]
        self.grads = [(p, p.requires_grad) for p in self.model.parameters()]
        self.model.eval()
        for p, _ in self.grads:
            p.requires_grad_(False)

    def __exit__(self, *exc: Any) -> None:
        for m, flag in self.training:
            m.training = flag
        for p, flag in self.grads:
            p.requires_grad_(flag)


def _logits(output: Any) -> "torch.Tensor":
    if isinstance(output, torch.Tensor):
        return output
    logits = getattr(output, "logits", None)
    if logits is None and isinstance(output, (tuple, list)) and output and isinstance(output[0], torch.Tensor):
        logits = output[0]
    if not isinstance(logits, torch.Tensor) or logits.ndim != 3:
        raise TypeError("`model` must return (batch, length, vocab) logits (a tensor, or an output with .logits); "
                        f"got {type(output).__name__}")
    return logits


def _target_prob(logits: "torch.Tensor", position: int, target: int) -> "torch.Tensor":
    """P(target) at ``position`` of every row: the softmax in float32 (float64 for float64 logits)."""
    z = logits[:, position, :]
    z = z.to(torch.promote_types(z.dtype, torch.float32))
    return torch.softmax(z, dim=-1)[:, target]


def _accepts_cache(model: "nn.Module") -> bool:
    try:
        params = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return False
    return "past_key_values" in params and "use_cache" in params


# --------------------------------------------------------------------------------------------------
# integrated gradients
# --------------------------------------------------------------------------------------------------
def _check_ids(input_ids: Any) -> "torch.Tensor":
    check_tensor(input_ids, "input_ids", dtype="integer")
    if input_ids.ndim == 2 and input_ids.shape[0] == 1:
        input_ids = input_ids[0]
    if input_ids.ndim != 1:
        raise ValueError(f"`input_ids` must be one prompt, (length,) or (1, length); got shape "
                         f"{tuple(input_ids.shape)}")
    if input_ids.numel() == 0:
        raise ValueError("`input_ids` must hold at least one token; got none")
    if int(input_ids.min()) < 0:
        raise ValueError(f"`input_ids` must be token ids >= 0; got {int(input_ids.min())}")
    return input_ids


def _check_targets(target_id: Any) -> list[int]:
    if isinstance(target_id, torch.Tensor):
        if target_id.is_floating_point() or target_id.is_complex() or target_id.dtype == torch.bool \
                or target_id.ndim > 1:
            raise TypeError("`target_id` must be an int token id or a sequence of them (a 0-D or 1-D integer "
                            f"tensor); got dtype {target_id.dtype}, shape {tuple(target_id.shape)}")
        target_id = target_id.tolist()
    if isinstance(target_id, (list, tuple)):
        if not target_id:
            raise ValueError("`target_id` must hold at least one token id; got an empty sequence")
        return [check_int(t, "target_id", minimum=0, maximum=2**31 - 1) for t in target_id]
    return [check_int(target_id, "target_id", minimum=0, maximum=2**31 - 1)]


def _prefix_cache(model: "nn.Module", ids: "torch.Tensor") -> Any:
    """The key-value cache of the prompt without its last token, or None where the model's cache cannot be
    cropped and repeated over the batch."""
    kwargs = {"use_cache": True}
    try:
        if "logits_to_keep" in inspect.signature(model.forward).parameters:
            kwargs["logits_to_keep"] = 1      # the prefix's logits are not needed
    except (TypeError, ValueError):
        pass
    with torch.no_grad():
        past = getattr(model(ids[None, :-1], **kwargs), "past_key_values", None)
    if past is None or not all(hasattr(past, m) for m in ("crop", "batch_repeat_interleave",
                                                          "batch_select_indices")):
        return None
    return past


def _ig_one(model: "nn.Module", module: "nn.Module", ids: "torch.Tensor", target: int, position: int,
            steps: int, batch_size: int, cache: bool) -> tuple:
    """Integrated gradients of one prompt and one target token: (scores, a, path probabilities)."""
    T = ids.numel()
    pos = position % T
    past = _prefix_cache(model, ids) if cache and pos == T - 1 and T > 1 else None
    hook = _ScaledPath(-1 if past is not None else pos)
    handle = module.register_forward_hook(hook)
    grad_sum, probs, a, prev = None, [], None, 0
    try:
        for start in range(0, steps, batch_size):
            b = min(batch_size, steps - start)
            hook.alpha = torch.linspace(0.0, 1.0, steps, dtype=torch.float64)[start:start + b]
            hook.a = None
            with torch.enable_grad():
                if past is not None:
                    if start == 0:
                        past.batch_repeat_interleave(b)
                    else:
                        past.crop(T - 1)
                        if b < prev:
                            past.batch_select_indices(torch.arange(b, device=ids.device))
                    out = model(ids[None, T - 1:].expand(b, 1), past_key_values=past, use_cache=True)
                    logits = _logits(out)
                    p_pos = -1
                else:
                    logits = _logits(model(ids[None].expand(b, T)))
                    p_pos = pos
                if hook.a is None:
                    raise ValueError("`module_name`: the module was not called in the model's forward pass")
                if not 0 <= target < logits.shape[-1]:
                    raise ValueError(f"`target_id` must be in [0, {logits.shape[-1]}) (the vocabulary); got {target}")
                p = _target_prob(logits, p_pos, target)
                (g,) = torch.autograd.grad(p.sum(), hook.x)
            prev = b
            a = hook.a
            grad_sum = g.sum(0) if grad_sum is None else grad_sum + g.sum(0)
            probs.append(p.detach())
    finally:
        handle.remove()
        hook.x = hook.alpha = None
    return a * grad_sum / steps, a, torch.cat(probs)


@constraints(model="any", input_ids="tensor", target_id="any", layer="index", steps="int>=2", module_name="any",
             position="index", batch_size="count", prefix_cache="bool")
def integrated_gradients_neurons(model: "nn.Module", input_ids: "torch.Tensor", target_id: Any, layer: int, *,
                                 steps: int = 20, module_name: str | None = None, position: int = -1,
                                 batch_size: int | None = None, prefix_cache: bool | None = None) -> Result:
    """KnowBias's integrated-gradient attribution of one layer's FFN neurons for a target token.

    With a the layer's activation vector at ``position`` (the FFN input projection's output),
    ``Attr = (a / m) * sum_k dP(y* | act = alpha_k a) / d act`` for alpha_k = linspace(0, 1, m), m = ``steps``,
    where P is the softmax probability of the target token at ``position`` (computed in float32, or float64 for
    a float64 model) and the whole vector at ``position`` is replaced by the scaled copy. The ``m`` scaled
    copies run as a batch (chunks of ``batch_size``): one forward and one backward instead of ``m``. For a
    causal model and the last position, the earlier positions do not depend on the replaced activation, so by
    default the prompt's prefix runs once and its key-value cache serves every copy (``prefix_cache``).
    Completeness: ``scores.sum() ~= P(a) - P(0)`` up to the Riemann error of the sum (exact when P is linear in
    the activation); the Result reports the gap.

    Parameters
    ----------
    model : torch.nn.Module
        A language model returning (batch, length, vocab) logits (a tensor or an output with ``.logits``):
        transformers' ``LlamaForCausalLM``, ``GPT2LMHeadModel``, ``BertForMaskedLM``, ... It runs in evaluation
        mode with its parameters' gradients off during the call (the flags are put back afterwards).
    input_ids : torch.Tensor
        One prompt: (length,) or (1, length) token ids.
    target_id : int or sequence of int
        The target token y*; a sequence is a multi-token target: the tokens are appended to the prompt one at a
        time (the j-th attribution predicts token j after the prompt and the tokens before it) and the
        attributions, probabilities and gaps are averaged (meant for causal models).
    layer : int
        The block (negative counts from the end for known layouts).
    steps : int, default 20
        m, the number of points of the path, both ends included (at least 2).
    module_name : str, optional
        The FFN input projection (see :func:`ffn_module_name`); None detects the layout.
    position : int, default -1
        The position whose activation is scaled and where the target is predicted (-1: the last token; for a
        masked LM the mask's position).
    batch_size : int, optional
        Scaled copies per forward/backward (None: all ``steps`` at once; 1 is the plain loop over the steps).
    prefix_cache : bool, optional
        Run the prefix once and reuse its key-value cache (valid for causal attention and the last position
        only). None: when the layout is llama or GPT-2, the position is the last one and the model's forward
        takes ``past_key_values``.

    Returns
    -------
    Result
        scores : torch.Tensor
            (units,) attributions (float32, or float64 for a float64 model), averaged over the target tokens.
        activation : torch.Tensor
            (units,) the baseline activation a of the prompt itself (the first target token's).
        prob : float
            P(a): the target's probability with the activation unchanged (mean over target tokens).
        prob_zero : float
            P(0): the same with the activation at the position set to zero.
        completeness_gap : float
            ``scores.sum() - (prob - prob_zero)``.
        path_probs : torch.Tensor
            (n_targets, steps) P(alpha_k a) along the path.
        target_ids : list of int
            The target tokens attributed.
        layer : int
            The block (non-negative).
        module_name : str
            The hooked module's dotted name.
        steps : int
            m, the points of the path.

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.tokendrop import TinyLlamaConfig, TinyLlamaForCausalLM
    >>> from numtk.torch.knowbias import integrated_gradients_neurons
    >>> model = TinyLlamaForCausalLM(TinyLlamaConfig(num_hidden_layers=2, intermediate_size=24), rng=0)
    >>> res = integrated_gradients_neurons(model, torch.tensor([3, 1, 4, 1, 5]), 9, layer=1)
    >>> res.scores.shape, res.module_name
    (torch.Size([24]), 'model.layers.1.mlp.gate_proj')
    >>> abs(res.completeness_gap) < 1e-6
    True
    """
    model = _check_module(model)
    ids = _check_ids(input_ids)
    targets = _check_targets(target_id)
    name, layer, layout = _resolve(model, layer, module_name)
    steps = check_int(steps, "steps", minimum=2, maximum=2**20)
    position = check_int(position, "position", minimum=-ids.numel(), maximum=ids.numel() - 1)
    batch_size = steps if batch_size is None else check_int(batch_size, "batch_size", minimum=1, maximum=2**20)
    if prefix_cache is None:
        cache = layout in _CAUSAL and _accepts_cache(model)
    else:
        cache = check_bool(prefix_cache, "prefix_cache")
        if cache and not _accepts_cache(model):
            raise ValueError("`prefix_cache` needs a model whose forward takes past_key_values and use_cache "
                             "(transformers' causal LMs)")
    module = model.get_submodule(name)
    try:
        param = next(model.parameters())
        if ids.device != param.device:
            raise ValueError(f"`input_ids` must be on the model's device, {param.device}; got {ids.device}")
    except StopIteration:
        pass
    scores, probs, acts = [], [], []
    with _InferenceState(model):
        for j, t in enumerate(targets):
            seq = ids if j == 0 else torch.cat([ids, ids.new_tensor(targets[:j])])
            s, a, p = _ig_one(model, module, seq, t, position, steps, batch_size, cache)
            scores.append(s)
            probs.append(p)
            acts.append(a)
    out_dtype = torch.promote_types(acts[0].dtype, torch.float32)
    score = torch.stack(scores).to(out_dtype).mean(0)
    path = torch.stack(probs)
    prob, prob_zero = float(path[:, -1].mean()), float(path[:, 0].mean())
    return Result(scores=score, activation=acts[0], prob=prob, prob_zero=prob_zero,
                  completeness_gap=float(score.sum()) - (prob - prob_zero), path_probs=path, target_ids=targets,
                  layer=layer, module_name=name, steps=steps)


# --------------------------------------------------------------------------------------------------
# selection
# --------------------------------------------------------------------------------------------------
def _check_scores(scores: Any, layers: Any) -> tuple[np.ndarray, list[int]]:
    check_tensor(scores, "scores")
    if scores.ndim == 2:
        s = scores.detach().to("cpu", torch.float64).numpy()[:, None, :]
    elif scores.ndim == 3:
        s = scores.detach().to("cpu", torch.float64).numpy()
    else:
        raise ValueError("`scores` must be (prompts, units) or (prompts, layers, units); got shape "
                         f"{tuple(scores.shape)}")
    if s.shape[0] == 0:
        raise ValueError("`scores` must hold at least one prompt; got 0")
    if layers is None:
        layers = list(range(s.shape[1]))
    else:
        if isinstance(layers, (str, bytes)) or not isinstance(layers, Iterable):
            raise TypeError(f"`layers` must be a sequence of ints (one per layer of `scores`); got "
                            f"{type(layers).__name__}")
        layers = [check_int(v, "layers") for v in layers]
        if len(layers) != s.shape[1]:
            raise ValueError(f"`layers` must give one layer number per layer of `scores` ({s.shape[1]}); got "
                             f"{len(layers)}")
    return s, layers


def _select(s: np.ndarray, layers: list[int], rel_threshold: float, share: float) -> list[tuple[int, int]]:
    P = s.shape[0]
    top = s.reshape(P, -1).max(axis=1)
    coarse = s > (rel_threshold * top)[:, None, None]
    counts = coarse.sum(axis=0)
    keep = np.argwhere(counts > share * P)
    return [(layers[i], int(u)) for i, u in keep]


@constraints(scores="tensor", rel_threshold="real", share="prob", layers="any")
def select_neurons(scores: "torch.Tensor", rel_threshold: float = 0.1, share: float = 0.49, *,
                   layers: Sequence[int] | None = None) -> list[tuple[int, int]]:
    """KnowBias's neuron selection: the neurons scoring high for more than a share of the prompts.

    Per prompt, the coarse set holds the neurons whose score exceeds ``rel_threshold`` times the prompt's largest
    score (over all its layers and units; a prompt whose largest score is not positive has an empty set unless
    ``rel_threshold`` is negative). A neuron is kept when it is in the coarse sets of more than ``share * P`` of
    the P prompts (strictly). The paper applies this per question-and-polarity group and overall: call it on
    each group's rows.

    Parameters
    ----------
    scores : torch.Tensor
        (prompts, units) attributions of one layer, or (prompts, layers, units) (stacked ``.scores`` of
        :func:`integrated_gradients_neurons`).
    rel_threshold : float, default 0.1
        The coarse threshold relative to each prompt's maximum.
    share : float, default 0.49
        The share of prompts, in [0, 1], a neuron must exceed.
    layers : sequence of int, optional
        The layer number of each row of the second axis (default 0, 1, ...).

    Returns
    -------
    list of (int, int)
        The kept (layer, unit) pairs, sorted; what :func:`enhance_neurons` takes.

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.knowbias import select_neurons
    >>> s = torch.tensor([[1.0, 0.5, 0.05, 0.0], [1.0, 0.0, 0.2, 0.0], [0.2, 1.0, 0.0, 0.0]])
    >>> select_neurons(s)                            # unit 0: 3 prompts, unit 1: 2, unit 2: 1 of 3
    [(0, 0), (0, 1)]
    >>> select_neurons(s[:, None, :], share=0.7, layers=[12])
    [(12, 0)]
    """
    rel_threshold = check_real(rel_threshold, "rel_threshold")
    share = check_real(share, "share", low=0.0, high=1.0)
    s, layers = _check_scores(scores, layers)
    return _select(s, layers, rel_threshold, share)


@constraints(scores="tensor", rel_threshold="real", share="prob", target="any", step="prob_open", layers="any",
             max_iter="cap")
def select_neurons_adaptive(scores: "torch.Tensor", rel_threshold: float = 0.2, share: float = 0.7, *,
                            target: tuple[int, int] = (2, 5), step: float = 0.05,
                            layers: Sequence[int] | None = None, max_iter: int = 100) -> Result:
    """KnowBias's adaptive selection: move the share until the kept neurons number between ``target``'s bounds.

    Starts from :func:`select_neurons` with ``rel_threshold`` (0.2) and ``share`` (0.7); while fewer than
    ``target[0]`` neurons are kept the share goes down by ``step``, while more than ``target[1]`` are kept it
    goes up by ``step``. It stops when the count is within the bounds (``success``), when the share would
    leave [0, 1), or when the direction would reverse (no share gives a count within the bounds: the counts jump
    over them); then the last selection is returned with ``success`` False.

    Parameters
    ----------
    scores : torch.Tensor
        As in :func:`select_neurons`.
    rel_threshold : float, default 0.2
        The coarse threshold relative to each prompt's maximum.
    share : float, default 0.7
        The starting share, in [0, 1].
    target : (int, int), default (2, 5)
        The accepted numbers of neurons, inclusive.
    step : float, default 0.05
        The change of the share per iteration, in (0, 1).
    layers : sequence of int, optional
        As in :func:`select_neurons`.
    max_iter : int, default 100
        Iterations at most.

    Returns
    -------
    Result
        neurons : list of (int, int)
            The kept (layer, unit) pairs.
        share : float
            The share that kept them.
        n_iter : int
            Changes of the share made.
        success : bool
            Whether the count is within ``target``.
        message : str
            Why the search stopped.

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.knowbias import select_neurons_adaptive
    >>> s = torch.tensor([[1.0, 0.5, 0.3, 0.0], [1.0, 0.0, 0.3, 0.0], [0.1, 1.0, 0.0, 0.0]])
    >>> res = select_neurons_adaptive(s)      # each unit is in 2 of 3 coarse sets: 0.7 keeps none, 0.65 all three
    >>> res.neurons, res.share, res.n_iter
    ([(0, 0), (0, 1), (0, 2)], 0.65, 1)
    """
    rel_threshold = check_real(rel_threshold, "rel_threshold")
    share = check_real(share, "share", low=0.0, high=1.0)
    step = check_real(step, "step", low=0.0, high=1.0, low_open=True, high_open=True)
    max_iter = check_int(max_iter, "max_iter", minimum=1)
    if (not isinstance(target, (tuple, list)) or len(target) != 2):
        raise TypeError(f"`target` must be a pair (low, high) of neuron counts; got {target!r}")
    lo = check_int(target[0], "target", minimum=0)
    hi = check_int(target[1], "target", minimum=lo)
    s, layers = _check_scores(scores, layers)
    neurons = _select(s, layers, rel_threshold, share)
    direction, n_iter = 0, 0
    message = f"{len(neurons)} neurons kept at share {share:g}"
    while not lo <= len(neurons) <= hi:
        d = -1 if len(neurons) < lo else 1
        if direction and d != direction:
            message = (f"no share keeps {lo} to {hi} neurons: the count jumps over them; {len(neurons)} kept at "
                       f"share {share:g}")
            break
        new = round(share + d * step, 12)
        if not 0.0 <= new < 1.0:
            message = f"the share would leave [0, 1); {len(neurons)} neurons kept at share {share:g}"
            break
        if n_iter >= max_iter:
            message = f"max_iter reached; {len(neurons)} neurons kept at share {share:g}"
            break
        direction, share, n_iter = d, new, n_iter + 1
        neurons = _select(s, layers, rel_threshold, share)
        message = f"{len(neurons)} neurons kept at share {share:g}"
    return Result(neurons=neurons, share=share, n_iter=n_iter, success=lo <= len(neurons) <= hi, message=message)


# --------------------------------------------------------------------------------------------------
# enhancement
# --------------------------------------------------------------------------------------------------
def _units_of(module: "nn.Module") -> int | None:
    for attr in ("out_features", "nf"):
        n = getattr(module, attr, None)
        if isinstance(n, int):
            return n
    dense = getattr(module, "dense", None)
    return getattr(dense, "out_features", None) if dense is not None else None


class _Scale:
    """A forward hook multiplying the output's ``units`` at ``position`` by ``lam``."""

    def __init__(self, units: "torch.Tensor", lam: float, position: int, name: str) -> None:
        self.units, self.lam, self.position, self.name = units, lam, position, name

    def __call__(self, module: "nn.Module", args: Any, output: Any) -> "torch.Tensor":
        out = _output_tensor(output, f"module {self.name!r}")
        if not -out.shape[-2] <= self.position < out.shape[-2]:
            raise ValueError(f"`position` {self.position} is outside a forward call of {out.shape[-2]} positions "
                             f"(under key-value caching each decoding step has one)")
        if int(self.units.max()) >= out.shape[-1]:
            raise ValueError(f"`neurons`: unit {int(self.units.max())} is out of range for {self.name!r}, which has "
                             f"{out.shape[-1]} units")
        units = self.units.to(out.device)
        out = out.clone()
        sel = out[..., self.position, :].index_select(-1, units)
        out[..., self.position, units] = sel * self.lam
        return out


class NeuronEnhancement:
    """Forward hooks scaling selected FFN units (see :func:`enhance_neurons`); a context manager.

    Attributes
    ----------
    modules : dict
        The hooked module names and their units (sorted lists).
    lam : float
    """

    def __init__(self, model: "nn.Module", groups: dict[str, list[int]], lam: float, position: int) -> None:
        self.model, self.modules, self.lam, self.position = model, groups, lam, position
        self._handles: list = []
        for name, units in groups.items():
            idx = torch.tensor(units, dtype=torch.long)
            hook = _Scale(idx, lam, position, name)
            self._handles.append(model.get_submodule(name).register_forward_hook(hook))

    def remove(self) -> None:
        """Remove the hooks (idempotent); the model is as before."""
        for h in self._handles:
            h.remove()
        self._handles = []

    def __enter__(self) -> "NeuronEnhancement":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()


@constraints(model="any", neurons="any", lam="real", module_name="any", position="index")
def enhance_neurons(model: "nn.Module", neurons: Iterable[tuple[int, int]], lam: float, *,
                    module_name: str | None = None, position: int = -1) -> NeuronEnhancement:
    """KnowBias's enhancement: multiply the selected FFN units by ``lam`` at the last position of every call.

    Registers a forward hook on each layer's FFN input projection (:func:`ffn_module_name`) that multiplies
    the selected units of its output at ``position`` by ``lam``. With key-value caching each decoding step's
    forward sees only the new token, so under ``generate()`` every generated token is enhanced (and the prompt's
    last one); without a cache only the last position of the sequence passed in. The effect on a llama MLP is
    ``SiLU(lam g) * up`` for the gate g: not a scaling of the output. Nothing of the model changes; the hooks are
    removed on leaving the ``with`` block (or by ``remove()``), after which its outputs are bit-identical to
    before.

    Parameters
    ----------
    model : torch.nn.Module
        The language model.
    neurons : iterable of (int, int)
        (layer, unit) pairs, as :func:`select_neurons` returns; units index the module's last output axis.
    lam : float
        The factor (1 changes nothing; KnowBias's command line default is 1.0, the paper's value was not
        recovered).
    module_name : str, optional
        As in :func:`ffn_module_name`.
    position : int, default -1
        The position scaled in each call.

    Returns
    -------
    NeuronEnhancement
        The registered hooks, as a context manager (``with enhance_neurons(...):``) with ``remove()``.

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.tokendrop import TinyLlamaConfig, TinyLlamaForCausalLM
    >>> from numtk.torch.knowbias import enhance_neurons
    >>> model = TinyLlamaForCausalLM(TinyLlamaConfig(num_hidden_layers=2), rng=0)
    >>> ids = torch.tensor([[3, 1, 4, 1, 5]])
    >>> before = model(ids)
    >>> with enhance_neurons(model, [(1, 3), (0, 7)], lam=4.0):
    ...     during = model(ids)
    >>> bool((during[:, :-1] == before[:, :-1]).all()), bool((during[:, -1] != before[:, -1]).any())
    (True, True)
    >>> bool((model(ids) == before).all())
    True
    """
    model = _check_module(model)
    lam = check_real(lam, "lam")
    position = check_int(position, "position", minimum=-2**31, maximum=2**31 - 1)
    if isinstance(neurons, (str, bytes)) or not isinstance(neurons, Iterable):
        raise TypeError(f"`neurons` must be an iterable of (layer, unit) pairs; got {type(neurons).__name__}")
    groups: dict[str, set[int]] = {}
    for pair in neurons:
        if isinstance(pair, torch.Tensor):
            pair = pair.tolist()
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise TypeError(f"`neurons` must hold (layer, unit) pairs; got {pair!r}")
        layer = check_int(pair[0], "neurons")
        unit = check_int(pair[1], "neurons", minimum=0, maximum=2**31 - 1)
        try:
            name = _resolve(model, layer, module_name)[0]
        except ValueError as exc:
            if "`layer`" in str(exc):
                raise ValueError(f"`neurons`: layer {layer} is out of range: {exc}") from None
            raise
        n = _units_of(model.get_submodule(name))
        if n is not None and unit >= n:
            raise ValueError(f"`neurons`: unit {unit} is out of range for {name!r}, which has {n} units")
        groups.setdefault(name, set()).add(unit)
    return NeuronEnhancement(model, {k: sorted(v) for k, v in groups.items()}, lam, position)


# --------------------------------------------------------------------------------------------------
# a planted neuron
# --------------------------------------------------------------------------------------------------
@constraints(layer="int>=0", unit="int>=0", no_id="int>=0", strength="real", vocab_size="count",
             hidden_size="count", intermediate_size="count", rng="rng")
def planted_neuron_model(*, layer: int = 1, unit: int = 5, no_id: int = 2, strength: float = 2.0,
                         vocab_size: int = 16, hidden_size: int = 32, intermediate_size: int = 48,
                         rng: Any = 0) -> "nn.Module":
    """A 2-layer tiny llama (numtk's ``TinyLlamaForCausalLM``) in which one FFN unit drives P(``no_id``).

    The weights are random (normal, standard deviation 0.02) except a planted path: every token's embedding has
    a constant 10 in coordinate 0, so after RMSNorm every position carries a large coordinate 0; the planted
    unit's gate and up rows read that coordinate (the gate with weight ``strength / sqrt(hidden_size)``, the up
    row with ``1 / sqrt(hidden_size)``), its down column writes 1 into coordinate 1, and the output head's row of
    ``no_id`` reads coordinate 1 with weight 1.5 (nothing else writes or reads coordinate 1). So P(no) grows with
    the unit's activation, and integrated gradients should rank the unit first; enhancing it with ``lam > 1``
    raises P(no).

    Parameters
    ----------
    layer, unit : int
        The planted neuron (layer 0 or 1, a unit of the gate projection).
    no_id : int
        The token whose probability the unit drives.
    strength : float, default 2.0
        The planted unit's typical gate value, in [-100, 100].
    vocab_size, hidden_size, intermediate_size : int
        Sizes (at least 2 hidden features).
    rng : None, int, numpy.random.Generator or torch.Generator, default 0
        Draws the random weights.

    Returns
    -------
    TinyLlamaForCausalLM
        In evaluation mode, float32.

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.knowbias import enhance_neurons, planted_neuron_model
    >>> model = planted_neuron_model()
    >>> ids = torch.tensor([[3, 7, 4, 9]])
    >>> p = lambda: float(torch.softmax(model(ids)[0, -1], -1)[2].detach())
    >>> with enhance_neurons(model, [(1, 5)], lam=2.0):
    ...     p2 = p()
    >>> p2 > p()
    True
    """
    from numtk.torch._tinyllama import TinyLlamaConfig, TinyLlamaForCausalLM

    vocab_size = check_int(vocab_size, "vocab_size", minimum=2, maximum=2**20)
    hidden_size = check_int(hidden_size, "hidden_size", minimum=4, maximum=2**14)
    if hidden_size % 4:
        raise ValueError(f"`hidden_size` must be a multiple of 4 (4 heads of even width); got {hidden_size}")
    intermediate_size = check_int(intermediate_size, "intermediate_size", minimum=1, maximum=2**16)
    layer = check_int(layer, "layer", minimum=0, maximum=1)
    unit = check_int(unit, "unit", minimum=0, maximum=2**31 - 1)
    if unit >= intermediate_size:
        raise ValueError(f"`unit` must be a unit of the gate projection, below `intermediate_size` = "
                         f"{intermediate_size}; got {unit}")
    no_id = check_int(no_id, "no_id", minimum=0, maximum=vocab_size - 1)
    strength = check_real(strength, "strength", low=-100.0, high=100.0)
    cfg = TinyLlamaConfig(vocab_size=vocab_size, hidden_size=hidden_size, intermediate_size=intermediate_size,
                          num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)
    model = TinyLlamaForCausalLM(cfg, rng=rng)
    d = math.sqrt(hidden_size)
    with torch.no_grad():
        model.model.embed_tokens.weight[:, 0] = 10.0
        model.model.embed_tokens.weight[:, 1] = 0.0
        for block in model.model.layers:
            block.mlp.down_proj.weight[1, :] = 0.0       # only the planted unit writes coordinate 1
            block.self_attn.o_proj.weight[1, :] = 0.0
        mlp = model.model.layers[layer].mlp
        mlp.gate_proj.weight[unit] = 0.0
        mlp.gate_proj.weight[unit, 0] = strength / d
        mlp.up_proj.weight[unit] = 0.0
        mlp.up_proj.weight[unit, 0] = 1.0 / d
        mlp.down_proj.weight[:, unit] = 0.0
        mlp.down_proj.weight[1, unit] = 1.0
        model.lm_head.weight[:, 1] = 0.0
        model.lm_head.weight[no_id, 1] = 1.5
    return model.eval()


# --------------------------------------------------------------------------------------------------
# templated bias-knowledge questions
# --------------------------------------------------------------------------------------------------
#: (group attribute, trait) pairs of the templated questions; for every pair the right answer is "no"
_BIAS_PAIRS = (
    ("gender", "mathematical ability"), ("race", "intelligence"), ("religion", "honesty"),
    ("age", "the ability to learn new technology"), ("nationality", "work ethic"),
    ("sexual orientation", "parenting ability"), ("physical appearance", "competence at work"),
    ("disability", "the value of a person's opinion"), ("socioeconomic status", "moral character"),
    ("gender", "leadership ability"), ("ethnicity", "criminal behaviour"), ("accent", "intelligence"),
)


def bias_questions() -> list[str]:
    """A dozen templated yes/no bias-knowledge questions whose right answer is "no".

    Written for numtk from one template, ``"Do you think that {attribute} influences {trait}? Answer yes or
    no."`` (KnowBias's own question file carries no licence and is not used).

    Returns
    -------
    list of str

    Examples
    --------
    >>> from numtk.torch.knowbias import bias_questions
    >>> qs = bias_questions()
    >>> len(qs), qs[0]
    (12, 'Do you think that gender influences mathematical ability? Answer yes or no.')
    """
    return [f"Do you think that {a} influences {t}? Answer yes or no." for a, t in _BIAS_PAIRS]


@constraints(tokenizer="any", question="any", chat="bool")
def encode_question(tokenizer: Any, question: str, *, chat: bool = True) -> "torch.Tensor":
    """The token ids of a question as a user turn, ready for the assistant's first answer token.

    Parameters
    ----------
    tokenizer : transformers tokenizer
        A Hugging Face tokenizer (``apply_chat_template`` and ``__call__``).
    question : str
        The question.
    chat : bool, default True
        Wrap the question in the tokenizer's chat template with the generation prompt (when the tokenizer has
        one); False encodes the text as it is.

    Returns
    -------
    torch.Tensor
        (length,) int64 ids.

    Examples
    --------
    A stand-in tokenizer without a chat template (one id per character); with SmolLM2's tokenizer
    (:func:`numtk.torch.models.load_smollm2`) the question becomes a user turn followed by the assistant's header.

    >>> from numtk.torch.knowbias import encode_question
    >>> class Chars:
    ...     chat_template = None
    ...     def __call__(self, text):
    ...         return {"input_ids": [ord(c) for c in text]}
    >>> encode_question(Chars(), "Yes?")
    tensor([ 89, 101, 115,  63])
    """
    if not isinstance(question, str) or not question:
        raise TypeError(f"`question` must be a non-empty str; got {question!r}")
    chat = check_bool(chat, "chat")
    if not callable(tokenizer):
        raise TypeError(f"`tokenizer` must be a transformers tokenizer; got {type(tokenizer).__name__}")
    text = question
    if chat and getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template([{"role": "user", "content": question}], tokenize=False,
                                             add_generation_prompt=True)
    return torch.tensor(tokenizer(text)["input_ids"], dtype=torch.long)
