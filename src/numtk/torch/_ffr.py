"""FFR (Find, Fix, Reason): teacher evidence patches inside GRPO fine-tuning of a language model.

FFR (arXiv 2604.16243; code JethroJames/FFR, Apache-2.0) runs GRPO with G rollouts per prompt. A frozen teacher
inspects every failed rollout and returns a minimal *evidence patch* that does not give the answer away; the
student answers once more with the patch appended to the unchanged question, and the Robust Improvement Reward
gives that repaired rollout its new reward minus a tax kappa:

    R~_i = z_i R(tau_i) + (1 - z_i) (R(tau_i*) - kappa),   z_i = 1[accuracy_i >= 1].

Advantages are normalised within each prompt's group, ``(R~ - mean) / (std + 1e-4)`` with the unbiased
standard deviation, and the loss per completion token is the GRPO loss of the authors' trainer,
``-[exp(log pi - sg(log pi)) A - beta KL_k3]`` with ``KL_k3 = exp(d) - d - 1``, ``d = clamp(log pi_ref - log pi,
-10, 10)``, averaged over each sequence's completion tokens and then over sequences. All of this is **verified**
in the authors' code.

The pieces here:

- the rewards (:func:`rir_rewards`, :func:`extract_answer`, :func:`format_reward`, :func:`accuracy_reward`), the
  advantages (:func:`group_normalized_advantages`), the loss (:func:`grpo_token_loss`, :func:`k3_kl`) and the
  choice of the scored rollout (:func:`chosen_rollout`: see there for the anchor's discrepancy);
- the teacher: the :class:`Teacher` protocol, a rule-based CPU stub for arithmetic questions
  (:class:`ArithmeticTeacher`) and the anchor's re-answer prompt (:func:`patched_prompt`);
- a causal language model of ``transformers`` (or any module returning logits) in a GRPO step:
  :func:`sample_group` (G sampled completions per prompt, with the completion mask of the anchor),
  :func:`completion_logprobs` (per-token log-probabilities of the completions) and :func:`grpo_step`.
"""

from __future__ import annotations

import inspect
import json
import math
import re
from typing import Any, Protocol, Sequence, runtime_checkable

from numtk._lib import Result
from numtk._lib._constraints import constraints
from numtk._lib._validation import check_int, check_option, check_real
from numtk.torch._common import check_callable, check_reduction, check_tensor, device_generator, torch

__all__ = ["rir_rewards", "group_normalized_advantages", "k3_kl", "grpo_token_loss", "chosen_rollout",
           "extract_answer", "format_reward", "accuracy_reward", "Teacher", "ArithmeticTeacher", "patched_prompt",
           "sample_group", "completion_logprobs", "grpo_step", "PATCH_TEMPLATE"]

_SCORES = ("repaired", "original")
#: the anchor's re-answer instruction: the patch goes after the unchanged question
PATCH_TEMPLATE = ("\n\nAdditional Information: Based on careful analysis, here is some relevant information that "
                  "may help you answer the question:\n{patch}\n\nPlease reconsider the question with this additional "
                  "context and provide your answer.")
_ANSWER = re.compile(r"<answer>\s*(.*?)\s*</answer>", re.DOTALL)
_FORMAT = re.compile(r"<think>.*?</think>\s*<answer>.*?</answer>", re.DOTALL)


# --------------------------------------------------------------------------------------------------
# argument helpers
# --------------------------------------------------------------------------------------------------
def _as_mask(t: Any, name: str, like: "torch.Tensor", like_name: str) -> "torch.Tensor":
    """A bool tensor from ``t``: a bool tensor, or an integer or floating tensor of 0s and 1s, with the shape and
    device of ``like``."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"`{name}` must be a torch.Tensor of bools (or of 0s and 1s); got {type(t).__name__}")
    if t.shape != like.shape:
        raise ValueError(f"`{name}` must have the shape of `{like_name}`, {tuple(like.shape)}; got {tuple(t.shape)}")
    if t.device != like.device:
        raise ValueError(f"`{name}` must be on the device of `{like_name}`, {like.device}; got {t.device}")
    if t.dtype == torch.bool:
        return t
    if t.is_complex():
        raise TypeError(f"`{name}` must hold bools (or 0s and 1s); got dtype {t.dtype}")
    if t.numel() and not bool(((t == 0) | (t == 1)).all()):
        raise ValueError(f"`{name}` must hold only 0s and 1s (or be a bool tensor)")
    return t != 0


def _finite(t: "torch.Tensor") -> bool:
    with torch.no_grad():
        return bool(torch.isfinite(t).all())


def _check_group_size(group_size: Any, n: int) -> int:
    group_size = check_int(group_size, "group_size", minimum=2)
    if n % group_size:
        raise ValueError(f"`group_size` must divide the number of rollouts, {n} (each prompt's {group_size} rollouts "
                         f"consecutive); got {group_size}")
    return group_size


# --------------------------------------------------------------------------------------------------
# rewards and advantages
# --------------------------------------------------------------------------------------------------
@constraints(rewards="tensor", repaired_rewards="tensor", correct="any", kappa="real>=0", has_patch="any")
def rir_rewards(rewards: "torch.Tensor", repaired_rewards: "torch.Tensor", correct: "torch.Tensor",
                kappa: float = 0.3, *, has_patch: "torch.Tensor | None" = None) -> "torch.Tensor":
    """FFR's Robust Improvement Reward: ``R~_i = z_i R(tau_i) + (1 - z_i) (R(tau_i*) - kappa)``.

    A correct rollout keeps its reward; a failed rollout that was repaired (answered again with the teacher's
    patch) gets the reward of the repaired answer ``tau_i*`` less the tax ``kappa``.

    Parameters
    ----------
    rewards : torch.Tensor
        ``R(tau_i)``, the rewards of the original rollouts (any shape; floating).
    repaired_rewards : torch.Tensor
        ``R(tau_i*)``, full length: the shape, dtype and device of ``rewards``. Only the entries of failed rollouts
        that have a patch are read; the others (correct rollouts, failed ones without a patch) are ignored and may
        hold anything, NaN included (``torch.full_like(rewards, float('nan'))`` filled in at the repaired ones is
        a convenient start). The entries read must be finite.
    correct : torch.Tensor
        ``z_i``: a bool tensor (or one of 0s and 1s) of the shape of ``rewards``; True where the original rollout
        is correct (the anchor: accuracy reward >= 1).
    kappa : float, default 0.3
        The patch tax (``patch_tax``; the paper's best value and the launcher's is 0.3, the trainer's default 0).
    has_patch : torch.Tensor, optional
        Bool (or 0/1) tensor of the shape of ``rewards``: which failed rollouts were repaired. Default: every
        failed one. A failed rollout without a patch (the teacher returned nothing) keeps its own reward,
        untaxed, as in the anchor. Entries at correct rollouts are ignored.

    Returns
    -------
    torch.Tensor
        ``R~``, the shape, dtype and device of ``rewards``.

    Examples
    --------
    The hand case: rollouts 2 and 3 fail; their repairs score 1 and 0; kappa = 0.3.

    >>> import torch
    >>> from numtk.torch.ffr import rir_rewards
    >>> nan = float("nan")
    >>> rir_rewards(torch.tensor([1.0, 0.0, 0.0, 1.0]), torch.tensor([nan, 1.0, 0.0, nan]),
    ...             torch.tensor([True, False, False, True]), kappa=0.3)
    tensor([ 1.0000,  0.7000, -0.3000,  1.0000])
    """
    check_tensor(rewards, "rewards")
    check_tensor(repaired_rewards, "repaired_rewards", finite=False)
    if repaired_rewards.shape != rewards.shape:
        raise ValueError(f"`repaired_rewards` must have the shape of `rewards`, {tuple(rewards.shape)} (one entry per "
                         f"rollout; entries of correct rollouts are ignored); got {tuple(repaired_rewards.shape)}")
    if repaired_rewards.dtype != rewards.dtype:
        raise TypeError(f"`repaired_rewards` must have the dtype of `rewards`, {rewards.dtype}; "
                        f"got {repaired_rewards.dtype}")
    if repaired_rewards.device != rewards.device:
        raise ValueError(f"`repaired_rewards` must be on the device of `rewards`, {rewards.device}; "
                         f"got {repaired_rewards.device}")
    z = _as_mask(correct, "correct", rewards, "rewards")
    repaired = ~z
    if has_patch is not None:
        repaired = repaired & _as_mask(has_patch, "has_patch", rewards, "rewards")
    kappa = check_real(kappa, "kappa", low=0.0, high=torch.finfo(rewards.dtype).max / 2)
    used = repaired_rewards[repaired]
    if used.numel() and not bool(torch.isfinite(used).all()):
        raise ValueError("`repaired_rewards` must be finite at every failed rollout that has a patch (entries of "
                         "correct rollouts may be NaN)")
    return torch.where(repaired, repaired_rewards - kappa, rewards)


@constraints(rewards="tensor", group_size="int>=2", eps="real>0", ddof="int>=0")
def group_normalized_advantages(rewards: "torch.Tensor", group_size: int, eps: float = 1e-4,
                                ddof: int = 1) -> "torch.Tensor":
    """GRPO's advantages: each reward less its group's mean, over the group's standard deviation plus ``eps``.

    ``A_i = (R_i - mean_G R) / (std_G R + eps)``, the standard deviation with ``ddof`` (1: unbiased, as
    ``torch.std`` in the anchor). Groups are consecutive: rollouts ``k G .. (k + 1) G - 1`` answer prompt ``k``
    (``prompts.repeat_interleave(G)``, the layout of TRL and of :func:`sample_group`).

    Parameters
    ----------
    rewards : torch.Tensor
        (N,) rewards (for FFR: :func:`rir_rewards`), N a multiple of ``group_size``.
    group_size : int
        G >= 2 (with one rollout per group the unbiased standard deviation is undefined: the anchor would give NaN).
    eps : float, default 1e-4
        Added to the standard deviation (> 0: a group of equal rewards gets advantages 0).
    ddof : int, default 1
        Delta degrees of freedom of the standard deviation, 0 <= ddof < G.

    Returns
    -------
    torch.Tensor
        (N,) advantages, the dtype and device of ``rewards``. Each group's advantages sum to 0; a group of equal
        rewards gets exact zeros (the rewards are centred on the group's first reward before averaging).

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.ffr import group_normalized_advantages
    >>> A = group_normalized_advantages(torch.tensor([1.0, 0.0, 0.0, 1.0, 0.5, 0.5, 0.5, 0.5]), 4)
    >>> A
    tensor([ 0.8659, -0.8659, -0.8659,  0.8659,  0.0000,  0.0000,  0.0000,  0.0000])
    """
    check_tensor(rewards, "rewards", ndim=1)
    G = _check_group_size(group_size, rewards.shape[0])
    eps = check_real(eps, "eps", low=0.0, low_open=True)
    ddof = check_int(ddof, "ddof", minimum=0)
    if ddof >= G:
        raise ValueError(f"`ddof` must be smaller than `group_size`, {G}; got {ddof}")
    r = rewards.reshape(-1, G)
    d = r - r[:, :1]                       # exact zeros for a group of equal rewards
    centred = d - d.mean(dim=1, keepdim=True)
    std = torch.sqrt(centred.square().sum(dim=1, keepdim=True) / (G - ddof))
    return (centred / (std + eps)).reshape(-1)


# --------------------------------------------------------------------------------------------------
# the loss
# --------------------------------------------------------------------------------------------------
@constraints(logp="tensor", ref_logp="tensor", clamp="real>0")
def k3_kl(logp: "torch.Tensor", ref_logp: "torch.Tensor", *, clamp: float = 10.0) -> "torch.Tensor":
    """The k3 estimator of KL(pi || pi_ref) per token: ``exp(d) - d - 1``, ``d = clamp(ref_logp - logp, -c, c)``.

    Non-negative, zero where the two log-probabilities agree; unbiased for the KL divergence when the tokens are
    drawn from pi. The clamp (the anchor's 10) bounds ``d``; outside it the gradient is zero.

    Parameters
    ----------
    logp, ref_logp : torch.Tensor
        Log-probabilities of the same tokens under the policy and the reference (the same shape, dtype, device).
    clamp : float, default 10.0
        ``c > 0``.

    Returns
    -------
    torch.Tensor
        The per-token estimates, the shape of ``logp``.

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.ffr import k3_kl
    >>> k3_kl(torch.tensor([-1.0, -2.0, -1.0]), torch.tensor([-1.0, -1.0, -30.0]))
    tensor([0.0000, 0.7183, 9.0000])
    """
    check_tensor(logp, "logp")
    check_tensor(ref_logp, "ref_logp")
    if ref_logp.shape != logp.shape or ref_logp.dtype != logp.dtype or ref_logp.device != logp.device:
        raise ValueError(f"`ref_logp` must have the shape, dtype and device of `logp` ({tuple(logp.shape)}, "
                         f"{logp.dtype}, {logp.device}); got {tuple(ref_logp.shape)}, {ref_logp.dtype}, "
                         f"{ref_logp.device}")
    c = min(check_real(clamp, "clamp", low=0.0, low_open=True), torch.finfo(logp.dtype).max)
    d = torch.clamp(ref_logp - logp, -c, c)
    return torch.expm1(d) - d


@constraints(logp="tensor", ref_logp="tensor", advantages="tensor", mask="any", beta="real>=0", kl_clamp="real>0",
             reduction="option")
def grpo_token_loss(logp: "torch.Tensor", ref_logp: "torch.Tensor", advantages: "torch.Tensor", mask: "torch.Tensor",
                    beta: float = 0.04, *, kl_clamp: float = 10.0, reduction: str = "mean") -> "torch.Tensor":
    """The GRPO loss of FFR's trainer: ``-[exp(log pi - sg(log pi)) A - beta KL_k3]`` per completion token.

    The ratio ``exp(log pi - sg(log pi))`` equals 1 in value and has the gradient of ``log pi``: the loss of a
    token is ``-A`` (plus ``beta KL_k3``) and its gradient ``-A grad log pi`` (plus the KL's), the policy gradient
    of one on-policy update. Per sequence the token losses are averaged over its completion tokens (``mask``),
    then ``reduction`` combines the sequences (the anchor: their mean).

    Parameters
    ----------
    logp : torch.Tensor
        (B, T) log-probabilities of the completion tokens under the policy (with autograd; e.g.
        :func:`completion_logprobs`). Entries outside ``mask`` are ignored but must be finite (pad with 0).
    ref_logp : torch.Tensor
        (B, T) the same under the frozen reference; the shape, dtype and device of ``logp``. Treated as a
        constant (detached).
    advantages : torch.Tensor
        (B,) one advantage per sequence (e.g. :func:`group_normalized_advantages`); on ``logp``'s device, cast to
        its dtype.
    mask : torch.Tensor
        (B, T) which tokens are completion tokens: a bool tensor, or one of 0s and 1s of any real dtype (an
        attention-style int64 mask works; declared ``any`` for that reason, checked here). A row without any
        completion token contributes 0 (the anchor's masks always hold at least the EOS token).
    beta : float, default 0.04
        Weight of the k3 KL penalty (0: none).
    kl_clamp : float, default 10.0
        The clamp of ``log pi_ref - log pi`` in the KL (see :func:`k3_kl`).
    reduction : {'mean', 'sum', 'none'}, default 'mean'
        Over the sequences: their mean (the anchor), their sum, or the (B,) per-sequence losses.

    Returns
    -------
    torch.Tensor
        The loss (a scalar, or (B,) with ``reduction='none'``).

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.ffr import grpo_token_loss
    >>> logp = torch.tensor([[-1.0, -2.0, 0.0], [-0.5, 0.0, 0.0]], requires_grad=True)
    >>> mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    >>> A = torch.tensor([1.0, -2.0])
    >>> grpo_token_loss(logp, logp.detach(), A, mask, beta=0.0, reduction="none")
    tensor([-1.,  2.], grad_fn=<DivBackward0>)
    >>> grpo_token_loss(logp, logp.detach(), A, mask, beta=0.0).backward()
    >>> logp.grad[:, :2]       # -A / (completion tokens of the sequence) / B; 0 outside the mask
    tensor([[-0.2500, -0.2500],
            [ 1.0000,  0.0000]])
    """
    check_tensor(logp, "logp", ndim=2, finite=False)  # finiteness: checked on the loss
    check_tensor(ref_logp, "ref_logp")          # checked here: the KL's clamp would hide an infinity
    if ref_logp.shape != logp.shape:
        raise ValueError(f"`ref_logp` must have the shape of `logp`, {tuple(logp.shape)}; got {tuple(ref_logp.shape)}")
    if ref_logp.dtype != logp.dtype:
        raise TypeError(f"`ref_logp` must have the dtype of `logp`, {logp.dtype}; got {ref_logp.dtype}")
    if ref_logp.device != logp.device:
        raise ValueError(f"`ref_logp` must be on the device of `logp`, {logp.device}; got {ref_logp.device}")
    B = logp.shape[0]
    check_tensor(advantages, "advantages", shape=(B,), finite=False)
    if advantages.device != logp.device:
        raise ValueError(f"`advantages` must be on the device of `logp`, {logp.device}; got {advantages.device}")
    m = _as_mask(mask, "mask", logp, "logp")
    beta = check_real(beta, "beta", low=0.0)
    c = min(check_real(kl_clamp, "kl_clamp", low=0.0, low_open=True), torch.finfo(logp.dtype).max)
    reduction = check_reduction(reduction)
    A = advantages.to(logp.dtype).unsqueeze(1)
    per_token = -(torch.exp(logp - logp.detach()) * A)
    if beta:
        d = torch.clamp(ref_logp.detach() - logp, -c, c)
        per_token = per_token + beta * (torch.expm1(d) - d)
    w = m.to(logp.dtype)
    per_seq = (per_token * w).sum(dim=1) / w.sum(dim=1).clamp_min(1.0)
    if per_seq.numel() and not _finite(per_seq):
        # one check of the (B,) result instead of passes over logp and advantages: a NaN or infinity anywhere in
        # them (masked-out entries included: 0 * NaN is NaN) shows here, and is then named
        check_tensor(logp, "logp")
        check_tensor(advantages, "advantages")
        raise ValueError(f"the loss overflows {logp.dtype}: `beta` ({beta:g}) times the KL term is too large")
    if reduction == "mean":
        return per_seq.mean() if B else per_seq.sum()
    if reduction == "sum":
        return per_seq.sum()
    return per_seq


# --------------------------------------------------------------------------------------------------
# which rollout is scored
# --------------------------------------------------------------------------------------------------
@constraints(original="any", repaired="any", correct="any", score="option", has_patch="any")
def chosen_rollout(original: Any, repaired: Any, correct: "torch.Tensor", *, score: str = "repaired",
                   has_patch: "torch.Tensor | None" = None) -> Any:
    """The rollout whose log-probabilities carry each RIR reward: the original or the repaired one.

    ``score='repaired'`` (numtk's default, the paper's description: the update uses "the original correct
    rollout or the repaired rollout"): a failed rollout that has a patch is replaced by its repaired rollout
    ``tau_i*``; correct rollouts (and failed ones without a patch) stay. ``score='original'`` is the anchor's
    trainer: its loss scores the *original, failed* completion under the original prompt, with the repaired
    reward ``R(tau_i*) - kappa`` from :func:`rir_rewards` as its reward -- so a repair that succeeds reinforces
    the failed answer. Both are offered; the bandit demo compares them.

    Whether the patch is part of the scored context is decided by what ``repaired`` holds: numtk's convention
    (and :func:`grpo_step`'s) is the rollout *as it was sampled*, the question with the patch appended
    (:func:`patched_prompt`) followed by the re-answer, with the loss mask on the re-answer's tokens only (the
    patch and question are context, never trained on). Passing the re-answer after the unchanged question instead
    scores it without the patch (an off-policy target that the ratio trick treats as on-policy).

    Parameters
    ----------
    original, repaired : torch.Tensor or sequence
        The N original and N repaired rollouts: tensors of one shape (N, ...) (token ids padded to one length,
        masks, log-probabilities, on one device), or sequences of length N (strings, lists of ids, ...); entries
        of ``repaired`` at correct rollouts are never read. Declared ``any``: checked here.
    correct : torch.Tensor
        (N,) bools (or 0s and 1s): which original rollouts are correct.
    score : {'repaired', 'original'}, default 'repaired'
        See above.
    has_patch : torch.Tensor, optional
        (N,) bools: which failed rollouts have a repaired rollout (default: all of them).

    Returns
    -------
    torch.Tensor or list
        The chosen rollouts: a tensor like ``original`` when both are tensors, else a list.

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.ffr import chosen_rollout
    >>> ok = torch.tensor([True, False, False, True])
    >>> chosen_rollout(["a1", "a2", "a3", "a4"], [None, "b2", "b3", None], ok)
    ['a1', 'b2', 'b3', 'a4']
    >>> chosen_rollout(["a1", "a2", "a3", "a4"], [None, "b2", "b3", None], ok, score="original")
    ['a1', 'a2', 'a3', 'a4']
    >>> chosen_rollout(torch.tensor([[1, 1], [2, 2]]), torch.tensor([[0, 0], [7, 7]]), torch.tensor([1, 0]))
    tensor([[1, 1],
            [7, 7]])
    """
    score = check_option(score, "score", _SCORES)
    if not isinstance(correct, torch.Tensor):
        raise TypeError(f"`correct` must be a torch.Tensor of bools (or of 0s and 1s); got {type(correct).__name__}")
    if correct.ndim != 1:
        raise ValueError(f"`correct` must be a 1-D tensor (one entry per rollout); got shape {tuple(correct.shape)}")
    n = correct.shape[0]
    tensors = isinstance(original, torch.Tensor) and isinstance(repaired, torch.Tensor)
    for name, x in (("original", original), ("repaired", repaired)):
        if isinstance(x, torch.Tensor):
            if x.ndim == 0 or x.shape[0] != n:
                raise ValueError(f"`{name}` must hold one rollout per entry of `correct` ({n}) along its first "
                                 f"dimension; got shape {tuple(x.shape)}")
        elif isinstance(x, (str, bytes)) or not isinstance(x, Sequence):
            raise TypeError(f"`{name}` must be a torch.Tensor or a sequence (list, tuple) of rollouts; "
                            f"got {type(x).__name__}")
        elif len(x) != n:
            raise ValueError(f"`{name}` must hold one rollout per entry of `correct` ({n}); got {len(x)}")
    if tensors:
        if repaired.shape != original.shape:
            raise ValueError(f"`repaired` must have the shape of `original`, {tuple(original.shape)} (pad both to one "
                             f"length); got {tuple(repaired.shape)}")
        if repaired.dtype != original.dtype:
            raise TypeError(f"`repaired` must have the dtype of `original`, {original.dtype}; got {repaired.dtype}")
        if repaired.device != original.device:
            raise ValueError(f"`repaired` must be on the device of `original`, {original.device}; "
                             f"got {repaired.device}")
        like = original[:, 0] if original.ndim > 1 else original
        if correct.device != original.device:
            raise ValueError(f"`correct` must be on the device of `original`, {original.device}; got {correct.device}")
    else:
        like = torch.empty(n, device=correct.device)
    z = _as_mask(correct, "correct", torch.empty(n, device=like.device), "original")
    use = ~z
    if has_patch is not None:
        use = use & _as_mask(has_patch, "has_patch", z, "correct")
    if score == "original":
        use = torch.zeros_like(use)
    if tensors:
        sel = use.reshape((n,) + (1,) * (original.ndim - 1))
        return torch.where(sel, repaired, original)
    flags = use.tolist()
    return [r if u else o for o, r, u in zip(original, repaired, flags)]


# --------------------------------------------------------------------------------------------------
# reward helpers
# --------------------------------------------------------------------------------------------------
def _strings(x: Any, name: str) -> list[str]:
    if isinstance(x, str):
        x = [x]
    if not isinstance(x, Sequence) or not all(isinstance(s, str) for s in x):
        raise TypeError(f"`{name}` must be a string or a sequence of strings; got {type(x).__name__}")
    return list(x)


@constraints(text="any")
def extract_answer(text: str) -> str:
    """The content of the first ``<answer>...</answer>`` of ``text``, stripped; ``''`` if there is none.

    Parameters
    ----------
    text : str
        A completion (declared ``any``: checked here).

    Returns
    -------
    str
        The answer (the anchor's ``extract_answer``).

    Examples
    --------
    >>> from numtk.torch.ffr import extract_answer
    >>> extract_answer("<think>7 + 5 = 12</think> <answer> 42 </answer>")
    '42'
    """
    if not isinstance(text, str):
        raise TypeError(f"`text` must be a str; got {type(text).__name__}")
    m = _ANSWER.search(text)
    return m.group(1).strip() if m else ""


@constraints(completions="any", dtype="option")
def format_reward(completions: Any, *, dtype: Any = None) -> "torch.Tensor":
    """The anchor's format reward: 1 where a completion is ``<think>...</think>`` then ``<answer>...</answer>``
    (whitespace between them allowed, nothing before or after), else 0.

    Parameters
    ----------
    completions : str or sequence of str
        The completions' texts (declared ``any``: checked here).
    dtype : torch.dtype, optional
        Of the result (default float32).

    Returns
    -------
    torch.Tensor
        (N,) rewards in {0, 1}.

    Examples
    --------
    >>> from numtk.torch.ffr import format_reward
    >>> format_reward(["<think>a</think>\\n<answer>4</answer>", "<answer>4</answer>", "<think>a</think><answer>4"])
    tensor([1., 0., 0.])
    """
    texts = _strings(completions, "completions")
    dtype = _check_float_dtype(dtype)
    return torch.tensor([1.0 if _FORMAT.fullmatch(t) else 0.0 for t in texts], dtype=dtype)


def _check_float_dtype(dtype: Any) -> "torch.dtype":
    if dtype is None:
        return torch.float32
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"`dtype` must be a floating torch.dtype or None; got {dtype!r}")
    return dtype


def _number(s: str) -> float | None:
    try:
        v = float(s.replace(",", ""))
    except ValueError:
        return None
    return v if math.isfinite(v) else None


@constraints(completions="any", answers="any", numeric="bool", dtype="option")
def accuracy_reward(completions: Any, answers: Any, *, numeric: bool = False, dtype: Any = None) -> "torch.Tensor":
    """Exact-match accuracy of the answers in ``<answer>...</answer>`` (the anchor's multiple-choice and
    numerical rewards).

    Parameters
    ----------
    completions : str or sequence of str
        The completions (declared ``any``: checked here).
    answers : str or sequence of str
        The reference answers, one per completion (plain text, or text with an ``<answer>`` tag as the anchor's
        solutions).
    numeric : bool, default False
        False: the extracted strings must be equal. True: both are read as numbers (commas dropped) and compared
        rounded to 2 decimals, and a decimal point (or comma) must be present in both or neither, as in the
        anchor; an unreadable number scores 0.
    dtype : torch.dtype, optional
        Of the result (default float32).

    Returns
    -------
    torch.Tensor
        (N,) rewards in {0, 1}.

    Examples
    --------
    >>> from numtk.torch.ffr import accuracy_reward
    >>> accuracy_reward(["<answer>42</answer>", "<answer> 41 </answer>", "42"], ["42", "42", "42"])
    tensor([1., 0., 0.])
    >>> accuracy_reward(["<answer>1,000</answer>", "<answer>3.14159</answer>", "<answer>3</answer>"],
    ...                 ["1,000", "3.14", "3.0"], numeric=True)       # 3 against 3.0: one has a decimal point
    tensor([1., 1., 0.])
    """
    texts = _strings(completions, "completions")
    refs = _strings(answers, "answers")
    if len(refs) != len(texts):
        raise ValueError(f"`answers` must hold one answer per entry of `completions` ({len(texts)}); "
                         f"got {len(refs)}")
    if not isinstance(numeric, bool):
        raise TypeError(f"`numeric` must be True or False; got {type(numeric).__name__}")
    dtype = _check_float_dtype(dtype)
    out = []
    for text, ref in zip(texts, refs):
        got = extract_answer(text)
        want = extract_answer(ref) if _ANSWER.search(ref) else ref.strip()
        if not numeric:
            out.append(1.0 if got and got == want else 0.0)
            continue
        a, b = _number(got), _number(want)
        same_kind = (("." in got) or ("," in got)) == (("." in want) or ("," in want))
        out.append(1.0 if a is not None and b is not None and same_kind and round(a, 2) == round(b, 2) else 0.0)
    return torch.tensor(out, dtype=dtype)


# --------------------------------------------------------------------------------------------------
# the teacher
# --------------------------------------------------------------------------------------------------
@runtime_checkable
class Teacher(Protocol):
    """What FFR asks of a teacher: ``teacher(prompt, completion) -> patch``.

    Given the question and a failed completion, a teacher returns a short evidence patch (a string) that helps
    the student answer again **without stating the answer** (the anchor's teacher, a vision-language model
    behind an API, returns JSON with ``error_classification`` in {temporal, spatial, misconception}, the content
    and its evidence). An empty string means "no patch": the rollout is not repaired (pass ``has_patch`` to
    :func:`rir_rewards`). Any callable with this signature qualifies (``isinstance(f, Teacher)`` checks only
    that it is callable); :class:`ArithmeticTeacher` is a rule-based stub.
    """

    def __call__(self, prompt: str, completion: str) -> str:
        ...


_EXPR = re.compile(r"(-?\d+)\s*([+\-*x×])\s*(-?\d+)")


class ArithmeticTeacher:
    """A rule-based teacher for integer arithmetic questions (``a + b``, ``a - b``, ``a * b`` in the prompt).

    It finds the first such expression in the prompt and returns a JSON patch with the anchor's fields
    ``error_classification`` and ``content``:

    - ``"format"`` when the completion has no ``<answer>...</answer>``: how to write the answer;
    - ``"misconception"`` otherwise: whether the student's number is too large or too small, and a decomposition
      of the computation by place value (``17 + 25 = (10 + 20) + (7 + 5)``) left for the student to finish;
    - ``"unknown"`` (and a generic hint to re-read the question) when the prompt holds no expression.

    The patch never contains the answer: a candidate patch whose text holds the answer's digits as a number is
    replaced by the direction hint alone (checked for every patch; see ``leaks``). Runs on the CPU in
    microseconds; a stand-in for the anchor's model-based teacher in tests and demos, not a reproduction of it.

    Examples
    --------
    >>> from numtk.torch.ffr import ArithmeticTeacher, Teacher
    >>> teacher = ArithmeticTeacher()
    >>> isinstance(teacher, Teacher)
    True
    >>> import json
    >>> patch = json.loads(teacher("What is 17 + 25?", "<think>17 + 25</think><answer>32</answer>"))
    >>> patch["error_classification"]
    'misconception'
    >>> print(patch["content"])
    Your answer 32 is too small. Add by place value: 17 + 25 = (10 + 20) + (7 + 5); mind the carry.
    """

    def __call__(self, prompt: str, completion: str) -> str:
        if not isinstance(prompt, str):
            raise TypeError(f"`prompt` must be a str; got {type(prompt).__name__}")
        if not isinstance(completion, str):
            raise TypeError(f"`completion` must be a str; got {type(completion).__name__}")
        m = _EXPR.search(prompt)
        if not _ANSWER.search(completion):
            return self._patch("format", "Give your reasoning inside <think></think> and only the final number "
                                         "inside <answer></answer>.")
        if m is None:
            return self._patch("unknown", "Re-read the question: which quantity does it ask for?")
        a, op, b = int(m.group(1)), m.group(2), int(m.group(3))
        truth = a + b if op == "+" else a - b if op == "-" else a * b
        got = _number(extract_answer(completion))
        if got is not None and got == truth:
            return ""                                     # nothing to fix
        direction = ("Your answer is not a number. " if got is None else
                     f"Your answer {extract_answer(completion)} is too {'large' if got > truth else 'small'}. ")
        content = direction + self._decomposition(a, op, b)
        if self.leaks(content, truth):
            content = direction.strip()
        return self._patch("misconception", content)

    @staticmethod
    def _patch(kind: str, content: str) -> str:
        return json.dumps({"error_classification": kind, "content": content}, ensure_ascii=False)

    @staticmethod
    def _decomposition(a: int, op: str, b: int) -> str:
        def parts(x: int) -> tuple[int, int]:
            sign = -1 if x < 0 else 1
            return sign * (abs(x) // 10 * 10), sign * (abs(x) % 10)

        (at, ao), (bt, bo) = parts(a), parts(b)
        if op == "+":
            return f"Add by place value: {a} + {b} = ({at} + {bt}) + ({ao} + {bo}); mind the carry."
        if op == "-":
            return f"Subtract by place value: {a} - {b} = ({a} - {bt}) - {bo}."
        return f"Split the product: {a} * {b} = {a} * {bt} + {a} * {bo}."

    @staticmethod
    @constraints(patch="any", answer="any")
    def leaks(patch: str, answer: Any) -> bool:
        """Whether ``patch`` (a str) contains ``answer`` (its ``str``) as a number, not as part of a longer one."""
        if not isinstance(patch, str):
            raise TypeError(f"`patch` must be a str; got {type(patch).__name__}")
        return re.search(rf"(?<!\d)(?<!\d\.){re.escape(str(answer))}(?!\d)(?!\.\d)", patch) is not None


@constraints(prompt="any", patch="any")
def patched_prompt(prompt: str, patch: str) -> str:
    """The anchor's re-answer prompt: the unchanged question, then the patch under "Additional Information".

    Parameters
    ----------
    prompt : str
        The question, unchanged (declared ``any``: checked here).
    patch : str
        The teacher's patch.

    Returns
    -------
    str
        ``prompt + PATCH_TEMPLATE.format(patch=patch)``; apply the chat template to it as to the question.

    Examples
    --------
    >>> from numtk.torch.ffr import patched_prompt
    >>> lines = patched_prompt("What is 2 + 2?", "Count on your fingers.").splitlines()
    >>> lines[0], lines[1], lines[2].split(":")[0], lines[3]
    ('What is 2 + 2?', '', 'Additional Information', 'Count on your fingers.')
    """
    if not isinstance(prompt, str):
        raise TypeError(f"`prompt` must be a str; got {type(prompt).__name__}")
    if not isinstance(patch, str):
        raise TypeError(f"`patch` must be a str; got {type(patch).__name__}")
    return prompt + PATCH_TEMPLATE.format(patch=patch)


# --------------------------------------------------------------------------------------------------
# a causal language model in the loop
# --------------------------------------------------------------------------------------------------
def _ids(t: Any, name: str, ndim: int = 2) -> "torch.Tensor":
    check_tensor(t, name, ndim=ndim, dtype="integer")
    if t.numel() and int(t.min()) < 0:
        raise ValueError(f"`{name}` must hold token ids >= 0")
    return t


def _forward_kwargs(model: Any) -> set[str]:
    try:
        params = inspect.signature(model.forward if hasattr(model, "forward") else model).parameters
    except (TypeError, ValueError):  # pragma: no cover - builtins without a signature
        return set()
    return {n for n, p in params.items() if p.kind is not inspect.Parameter.VAR_KEYWORD}


def _logits(model: Any, ids: "torch.Tensor", attn: "torch.Tensor | None", keep: int | None = None) -> "torch.Tensor":
    """The model's logits (B, L or keep, V) for ``ids``; positions from the attention mask (left padding)."""
    names = _forward_kwargs(model)
    kwargs: dict[str, Any] = {}
    if attn is not None and "attention_mask" in names:
        kwargs["attention_mask"] = attn
        if "position_ids" in names:
            kwargs["position_ids"] = (attn.long().cumsum(-1) - 1).clamp_min(0)
    if "use_cache" in names:
        kwargs["use_cache"] = False
    if keep is not None and "logits_to_keep" in names:
        kwargs["logits_to_keep"] = keep
    out = model(ids, **kwargs)
    logits = out if isinstance(out, torch.Tensor) else getattr(out, "logits", None)
    if logits is None and isinstance(out, (tuple, list)) and out and isinstance(out[0], torch.Tensor):
        logits = out[0]
    if not isinstance(logits, torch.Tensor) or logits.ndim != 3 or logits.shape[0] != ids.shape[0]:
        raise TypeError("`model` must return logits of shape (B, L, V) (a tensor, or an output with .logits)")
    if keep is not None and logits.shape[1] != min(keep, ids.shape[1]):
        logits = logits[:, -min(keep, ids.shape[1]):]
    return logits


def _vocab_check(model: Any, ids: "torch.Tensor", name: str) -> None:
    get = getattr(model, "get_input_embeddings", None)
    emb = get() if callable(get) else None
    n = getattr(emb, "num_embeddings", None)
    if isinstance(n, int) and ids.numel() and int(ids.max()) >= n:
        raise ValueError(f"`{name}` must hold token ids < {n} (the model's vocabulary); got {int(ids.max())}")


@constraints(model="any", input_ids="any", attention_mask="any", completion_mask="any")
def completion_logprobs(model: Any, input_ids: "torch.Tensor", attention_mask: "torch.Tensor | None" = None,
                        completion_mask: "torch.Tensor | None" = None) -> "torch.Tensor":
    """Per-token log-probabilities ``log p(x_t | x_<t)`` of a causal language model, for the GRPO loss.

    Parameters
    ----------
    model : callable
        A causal LM: a ``transformers`` ``*ForCausalLM`` or any module ``model(input_ids, ...)`` returning logits
        (B, L, V) or an output with ``.logits``. ``attention_mask``, ``position_ids`` (from the attention mask, so
        left padding gives the positions generation used), ``use_cache=False`` and ``logits_to_keep`` (only the
        completion's logits are computed) are passed where its ``forward`` names them.
    input_ids : torch.Tensor
        (B, L) integer ids: prompt then completion (prompts left-padded, completions right-padded, as
        :func:`sample_group` returns them).
    attention_mask : torch.Tensor, optional
        (B, L) 0/1 or bool: 0 at padding.
    completion_mask : torch.Tensor, optional
        (B, L) 0/1 or bool: the completion tokens. Where given, only those positions are computed (from the first
        column that holds one) and the others are 0.

    Returns
    -------
    torch.Tensor
        (B, L) log-probabilities in the logits' dtype (float32 for half-precision logits), with autograd where
        the model has it; position 0 (no context) is 0. Pass it with ``completion_mask`` to
        :func:`grpo_token_loss`.

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.ffr import completion_logprobs
    >>> class Uniform(torch.nn.Module):                 # p(x) = 1/4 for every token
    ...     def forward(self, ids):
    ...         return torch.zeros(ids.shape + (4,))
    >>> ids = torch.tensor([[0, 1, 2, 3]])
    >>> completion_logprobs(Uniform(), ids, completion_mask=torch.tensor([[0, 0, 1, 1]]))
    tensor([[ 0.0000,  0.0000, -1.3863, -1.3863]])
    """
    check_callable(model, "model")
    ids = _ids(input_ids, "input_ids")
    B, L = ids.shape
    attn = None if attention_mask is None else _as_mask(attention_mask, "attention_mask", ids, "input_ids")
    comp = None if completion_mask is None else _as_mask(completion_mask, "completion_mask", ids, "input_ids")
    _vocab_check(model, ids, "input_ids")
    first = 1
    if comp is not None:
        cols = comp.any(dim=0).nonzero()
        first = max(1, int(cols[0]) if cols.numel() else L)
    if first >= L or B == 0:
        param = next(iter(model.parameters()), None) if hasattr(model, "parameters") else None
        dtype = param.dtype if param is not None and param.is_floating_point() else torch.get_default_dtype()
        return torch.zeros(B, L, dtype=dtype, device=ids.device)
    keep = L - first + 1                                  # positions first-1 .. L-1 (the last is dropped)
    logits = _logits(model, ids, None if attn is None else attn.long(), keep)[:, :-1]
    if logits.dtype in (torch.float16, torch.bfloat16):
        logits = logits.float()
    target = ids[:, first:]
    lp = logits.gather(-1, target.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(logits, dim=-1)
    out = torch.cat([torch.zeros(B, first, dtype=lp.dtype, device=lp.device), lp], dim=1)
    if comp is not None:
        out = torch.where(comp, out, torch.zeros((), dtype=out.dtype, device=out.device))
    return out


@constraints(model="any", input_ids="any", attention_mask="any", group_size="count", max_new_tokens="count",
             temperature="real>0", top_p="prob", eos_token_id="any", pad_token_id="any", rng="rng")
def sample_group(model: Any, input_ids: "torch.Tensor", attention_mask: "torch.Tensor | None" = None,
                 group_size: int = 4, *, max_new_tokens: int = 16, temperature: float = 1.0, top_p: float = 1.0,
                 eos_token_id: Any = None, pad_token_id: Any = None, rng: Any = None) -> Result:
    """G sampled completions per prompt, laid out for GRPO (each prompt's G rollouts consecutive).

    A plain sampling loop (no key/value cache: meant for short completions), every draw from ``rng``, with
    temperature and nucleus (top-p) sampling. A completion ends at its first ``eos_token_id`` (kept, and inside
    the completion mask, as in the anchor); later positions hold ``pad_token_id`` with attention 0.

    Parameters
    ----------
    model : callable
        A causal LM, as for :func:`completion_logprobs`; run under ``torch.no_grad()``.
    input_ids : torch.Tensor
        (P, L) prompt ids, left-padded.
    attention_mask : torch.Tensor, optional
        (P, L) 0/1 or bool; default all ones.
    group_size : int, default 4
        G, completions per prompt.
    max_new_tokens : int, default 16
        Completion length (at most).
    temperature : float, default 1.0
        Logits are divided by it.
    top_p : float, default 1.0
        Nucleus sampling: the smallest set of tokens of total probability >= top_p (1: all).
    eos_token_id : int or sequence of int, optional
        Token(s) that end a completion.
    pad_token_id : int, optional
        Written after the end (default: the first EOS id, else 0).
    rng : None, int, numpy.random.Generator or torch.Generator
        The draws (a torch.Generator on the ids' device).

    Returns
    -------
    Result
        input_ids : torch.Tensor
            (P G, L + n) prompt and completion ids (n <= max_new_tokens: the loop stops when every completion
            has ended).
        attention_mask : torch.Tensor
            (P G, L + n) int64: the prompt's, then 1 up to and including the EOS.
        completion_mask : torch.Tensor
            (P G, L + n) bool: the completion tokens (up to and including the first EOS).
        completion_ids : torch.Tensor
            (P G, n) the completions alone.
        prompt_length : int
            L.

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.ffr import sample_group
    >>> class Fixed(torch.nn.Module):                   # always token 2
    ...     def forward(self, ids):
    ...         return torch.nn.functional.one_hot(torch.full_like(ids, 2), 4).float() * 50
    >>> res = sample_group(Fixed(), torch.tensor([[0, 1]]), group_size=2, max_new_tokens=3, eos_token_id=2, rng=0)
    >>> res.input_ids
    tensor([[0, 1, 2],
            [0, 1, 2]])
    >>> res.completion_mask
    tensor([[False, False,  True],
            [False, False,  True]])
    """
    check_callable(model, "model")
    ids = _ids(input_ids, "input_ids")
    P, L = ids.shape
    attn = (torch.ones_like(ids, dtype=torch.bool) if attention_mask is None else
            _as_mask(attention_mask, "attention_mask", ids, "input_ids"))
    G = check_int(group_size, "group_size", minimum=1, maximum=2**20)
    n_new = check_int(max_new_tokens, "max_new_tokens", minimum=1, maximum=2**20)
    temperature = check_real(temperature, "temperature", low=0.0, low_open=True)
    top_p = check_real(top_p, "top_p", low=0.0, high=1.0, low_open=True)
    eos = _token_ids(eos_token_id, "eos_token_id")
    pad = _token_ids(pad_token_id, "pad_token_id")
    if len(pad) > 1:
        raise ValueError(f"`pad_token_id` must be one int or None; got {pad_token_id!r}")
    pad_id = pad[0] if pad else (eos[0] if eos else 0)
    _vocab_check(model, ids, "input_ids")
    gen = device_generator(rng, ids.device, tensor="`input_ids`")
    seq = ids.repeat_interleave(G, dim=0)
    mask = attn.long().repeat_interleave(G, dim=0)
    B = seq.shape[0]
    done = torch.zeros(B, dtype=torch.bool, device=ids.device)
    comp_cols, comp_mask_cols = [], []
    eos_t = torch.tensor(eos, dtype=seq.dtype, device=ids.device) if eos else None
    with torch.no_grad():
        for _ in range(n_new):
            logits = _logits(model, seq, mask, keep=1)[:, -1].float()
            logits = logits - logits.max(dim=-1, keepdim=True).values      # 0 at the most probable token(s)
            if temperature >= torch.finfo(torch.float32).tiny:
                logits = logits / temperature
            else:                                                        # below float32's range: greedy
                logits = torch.where(logits == 0, 0.0, -math.inf)
            probs = torch.softmax(logits, dim=-1)
            if top_p < 1.0:
                sp, si = probs.sort(dim=-1, descending=True)
                before = sp.cumsum(-1) - sp                  # mass of the strictly more probable tokens
                sp = torch.where(before < top_p, sp, torch.zeros((), dtype=sp.dtype, device=sp.device))
                probs = torch.zeros_like(probs).scatter(-1, si, sp)
            tok = torch.multinomial(probs, 1, generator=gen).squeeze(1).to(seq.dtype)
            tok = torch.where(done, torch.full_like(tok, pad_id), tok)
            live = ~done
            seq = torch.cat([seq, tok[:, None]], dim=1)
            mask = torch.cat([mask, live.long()[:, None]], dim=1)
            comp_cols.append(tok)
            comp_mask_cols.append(live)
            if eos_t is not None:
                done = done | (live & (tok[:, None] == eos_t).any(dim=1))
            if bool(done.all()):
                break
    comp = torch.stack(comp_cols, dim=1)
    cmask = torch.cat([torch.zeros(B, L, dtype=torch.bool, device=ids.device), torch.stack(comp_mask_cols, 1)], 1)
    return Result(input_ids=seq, attention_mask=mask, completion_mask=cmask, completion_ids=comp, prompt_length=L)


def _token_ids(x: Any, name: str) -> list[int]:
    if x is None:
        return []
    items = [x] if not isinstance(x, (list, tuple)) else list(x)
    out = []
    for v in items:
        if isinstance(v, torch.Tensor) and v.numel() == 1 and not v.is_floating_point():
            v = int(v)
        out.append(check_int(v, name, minimum=0))
    return out


@constraints(model="any", ref_model="any", optimizer="any", input_ids="any", attention_mask="any",
             completion_mask="any", advantages="tensor", beta="real>=0", kl_clamp="real>0", max_grad_norm="real>0")
def grpo_step(model: Any, ref_model: Any, optimizer: Any, input_ids: "torch.Tensor", attention_mask: Any,
              completion_mask: "torch.Tensor", advantages: "torch.Tensor", *, beta: float = 0.04,
              kl_clamp: float = 10.0, max_grad_norm: float | None = None) -> Result:
    """One GRPO update of a causal LM: log-probabilities, the token loss, backward, an optimizer step.

    ``ref_model``'s log-probabilities are computed under ``torch.no_grad()`` (it is never changed);
    ``model``'s with autograd; then :func:`grpo_token_loss`, ``optimizer.zero_grad()``, ``backward``, optional
    gradient-norm clipping of the optimizer's parameters, ``optimizer.step()``. For FFR the rows are the chosen
    rollouts (:func:`chosen_rollout`) with the advantages of their RIR rewards.

    Parameters
    ----------
    model : callable
        The policy (an ``nn.Module``; see :func:`completion_logprobs`).
    ref_model : callable or None
        The frozen reference; None only with ``beta=0`` (no KL term).
    optimizer : torch.optim.Optimizer
        Over (some of) ``model``'s parameters.
    input_ids, attention_mask, completion_mask : torch.Tensor
        (B, L) as :func:`sample_group` returns them (``attention_mask`` may be None).
    advantages : torch.Tensor
        (B,) per-sequence advantages.
    beta : float, default 0.04
        KL weight.
    kl_clamp : float, default 10.0
        Clamp of the log-ratio in the KL.
    max_grad_norm : float, optional
        Clip the gradients' total norm to this before the step.

    Returns
    -------
    Result
        loss : float
            The loss before the step.
        kl : float
            Mean over sequences of the per-sequence mean k3 KL (the anchor's logged ``kl``).
        grad_norm : float
            Total gradient norm before clipping (NaN without ``max_grad_norm``).
        n_tokens : int
            Completion tokens in the batch.

    Examples
    --------
    >>> import torch
    >>> from numtk.torch.ffr import grpo_step
    >>> class Bigram(torch.nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.table = torch.nn.Parameter(torch.zeros(4, 4))
    ...     def forward(self, ids):
    ...         return self.table[ids]
    >>> policy = Bigram()
    >>> opt = torch.optim.SGD(policy.parameters(), lr=1.0)
    >>> ids, cm = torch.tensor([[0, 1], [0, 2]]), torch.tensor([[0, 1], [0, 1]])
    >>> res = grpo_step(policy, None, opt, ids, None, cm, torch.tensor([1.0, -1.0]), beta=0.0)
    >>> bool(policy.table[0, 1] > policy.table[0, 2])   # token 1 (advantage +1) is now more likely after 0
    True
    """
    check_callable(model, "model")
    beta = check_real(beta, "beta", low=0.0)
    if ref_model is None:
        if beta:
            raise ValueError("`ref_model` must be given when `beta` > 0 (the KL term needs the reference)")
    else:
        check_callable(ref_model, "ref_model")
        if ref_model is model:
            raise ValueError("`ref_model` must be a separate, frozen copy of `model` (got the policy itself)")
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(f"`optimizer` must be a torch.optim.Optimizer; got {type(optimizer).__name__}")
    c = check_real(kl_clamp, "kl_clamp", low=0.0, low_open=True)
    if max_grad_norm is not None:
        max_grad_norm = check_real(max_grad_norm, "max_grad_norm", low=0.0, low_open=True)
    ids = _ids(input_ids, "input_ids")
    comp = _as_mask(completion_mask, "completion_mask", ids, "input_ids")
    if attention_mask is not None:
        _as_mask(attention_mask, "attention_mask", ids, "input_ids")
    check_tensor(advantages, "advantages", shape=(ids.shape[0],))
    logp = completion_logprobs(model, ids, attention_mask, comp)
    if ref_model is None:
        ref = logp.detach()
    else:
        with torch.no_grad():
            ref = completion_logprobs(ref_model, ids, attention_mask, comp).to(logp.dtype)
    loss = grpo_token_loss(logp, ref, advantages.to(logp.device), comp, beta, kl_clamp=c)
    with torch.no_grad():
        w = comp.to(logp.dtype)
        kl = ((k3_kl(logp.detach(), ref, clamp=c) * w).sum(1) / w.sum(1).clamp_min(1.0)).mean()
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    grad_norm = float("nan")
    if max_grad_norm is not None:
        params = [p for g in optimizer.param_groups for p in g["params"] if p.grad is not None]
        grad_norm = float(torch.nn.utils.clip_grad_norm_(params, max_grad_norm))
    optimizer.step()
    return Result(loss=float(loss.detach()), kl=float(kl), grad_norm=grad_norm, n_tokens=int(comp.sum()))
