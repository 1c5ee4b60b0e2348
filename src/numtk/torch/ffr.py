"""
FFR: teacher evidence patches in GRPO fine-tuning (:mod:`numtk.torch.ffr`)
==========================================================================

.. currentmodule:: numtk.torch.ffr

"Find, Fix, Reason" (FFR, arXiv 2604.16243) fine-tunes a reasoning model with GRPO and a frozen teacher: each
failed rollout is shown to the teacher, which returns a minimal evidence patch that does not give the answer away;
the student answers once more with the patch appended to the unchanged question, and the Robust Improvement Reward
(RIR) gives that repaired rollout its new reward less a tax kappa. Advantages are normalised per prompt's group and
the loss is GRPO's token loss with the k3 KL estimate. Every formula follows the authors' code (verified).

Two choices are documented where they are made: which rollout carries the repaired reward (the paper: the repaired
rollout, numtk's default; the authors' trainer: the original failed completion, offered as ``score='original'``;
see :func:`chosen_rollout`), and whether the patch is part of the scored context (numtk: yes, the repaired rollout
is scored as it was sampled, the patch being context that is never trained on).

The pieces work on any causal language model of ``transformers`` (or any module returning logits): sample G
completions per prompt, score them, and take a GRPO step with the public functions below.

Importing this module imports torch (``pip install "numtk[torch]"``).

Rewards and advantages
----------------------

.. autosummary::
   :toctree: generated/

   rir_rewards                  -- the Robust Improvement Reward: repaired rollouts get their new reward less kappa.
   group_normalized_advantages  -- (R - group mean) / (group std + eps), groups of G consecutive rollouts.
   extract_answer               -- the content of ``<answer>...</answer>``.
   format_reward                -- 1 for ``<think>...</think><answer>...</answer>``, else 0.
   accuracy_reward              -- exact match of the extracted answer (strings, or numbers to 2 decimals).

Loss and rollouts
-----------------

.. autosummary::
   :toctree: generated/

   grpo_token_loss  -- -[exp(log pi - sg(log pi)) A - beta KL_k3], mean over completion tokens, then sequences.
   k3_kl            -- the k3 estimate exp(d) - d - 1 of the KL per token, d clamped.
   chosen_rollout   -- the scored rollout: the repaired one (default) or the anchor's original failed one.

Teacher
-------

.. autosummary::
   :toctree: generated/

   Teacher            -- the protocol: ``teacher(prompt, completion) -> patch``.
   ArithmeticTeacher  -- a rule-based CPU teacher for integer arithmetic questions (no answer leakage).
   patched_prompt     -- the anchor's re-answer prompt: the question, then the patch.
   PATCH_TEMPLATE     -- the anchor's "Additional Information" text that carries the patch.

A causal language model in the loop
-----------------------------------

.. autosummary::
   :toctree: generated/

   sample_group         -- G sampled completions per prompt, with the anchor's completion mask.
   completion_logprobs  -- per-token log-probabilities of the completions (left padding handled).
   grpo_step            -- one GRPO update: log-probabilities, loss, backward, optimizer step.
   demo                 -- the bandit toy: FFR against vanilla GRPO over five seeds.
"""

from numtk.torch import _common  # noqa: F401 - first: the ImportError that names the extra
from numtk.torch._demo_ffr import demo
from numtk.torch._ffr import (PATCH_TEMPLATE, ArithmeticTeacher, Teacher, accuracy_reward, chosen_rollout,
                              completion_logprobs, extract_answer, format_reward, group_normalized_advantages,
                              grpo_step, grpo_token_loss, k3_kl, patched_prompt, rir_rewards, sample_group)

__all__ = ["rir_rewards", "group_normalized_advantages", "extract_answer", "format_reward", "accuracy_reward",
           "grpo_token_loss", "k3_kl", "chosen_rollout", "Teacher", "ArithmeticTeacher", "patched_prompt",
           "PATCH_TEMPLATE", "sample_group", "completion_logprobs", "grpo_step", "demo"]
