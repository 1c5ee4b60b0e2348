"""
TokenDrop: token-level backpropagation skipping (:mod:`numtk.torch.tokendrop`)
==============================================================================

.. currentmodule:: numtk.torch.tokendrop

TokenDrop (Kim, Namkung and Jeon, ICML 2026) saves activation memory and backward work in fine-tuning by
backpropagating each decoder block through a subset of the tokens: those with the largest residual updates,
accumulated over depth. The mechanism is **reconstructed** (the paper's code was not available): the scores,
the nested cumulative selection, lazy scheduling and the no-grad token split are written from the abstract,
DropBP and TokenTune, with every open choice a parameter. The forward values do not change; only the backward
pass shrinks, measured here through saved-tensor hooks.

Importing this module imports torch (``pip install "numtk[torch]"``).

The method
----------

.. autosummary::
   :toctree: generated/

   residual_update_scores  -- per-token L2 norm of a block's residual update (the importance score).
   keep_count              -- ceil(rho T), the tokens a sequence keeps.
   cumulative_topk         -- the nested top-k selection by cumulative score (the set grows with depth).
   TokenDropBlock          -- a llama decoder block recomputed with the token split (no_grad for dropped tokens).
   wrap_model              -- wrap every decoder block of a llama-layout model (TokenDrop or layer skipping).
   unwrap_model            -- put the original blocks back.
   saved_activation_bytes  -- bytes autograd saves for backward during a call (saved-tensor hooks).

The baseline
------------

.. autosummary::
   :toctree: generated/

   LayerDropBlock  -- DropBP's layer-level skipping: a whole block's backward dropped at random.

A tiny model and a task
-----------------------

.. autosummary::
   :toctree: generated/

   TinyLlamaConfig       -- the sizes of a tiny llama-layout causal LM (transformers' names).
   TinyLlamaForCausalLM  -- a pure-torch llama (RMSNorm, RoPE, GQA, SwiGLU) with transformers' module names.
   apply_lora            -- freeze a model and add LoRA to named linear layers.
   copy_task             -- a batch of the copy task (symbols, separator, the symbols again).
   lm_loss               -- the shifted next-token cross-entropy with ignored labels.
   demo                  -- train the tiny model on the copy task with TokenDrop and plain backprop.
"""

from numtk.torch import _common  # noqa: F401 - first: the ImportError that names the extra
from numtk.torch._demo_tokendrop import demo
from numtk.torch._tinyllama import TinyLlamaConfig, TinyLlamaForCausalLM, apply_lora, copy_task, lm_loss
from numtk.torch._tokendrop import (LayerDropBlock, TokenDropBlock, cumulative_topk, keep_count,
                                    residual_update_scores, saved_activation_bytes, unwrap_model, wrap_model)

__all__ = ["residual_update_scores", "keep_count", "cumulative_topk", "TokenDropBlock", "wrap_model",
           "unwrap_model", "saved_activation_bytes", "LayerDropBlock", "TinyLlamaConfig", "TinyLlamaForCausalLM",
           "apply_lora", "copy_task", "lm_loss", "demo"]
