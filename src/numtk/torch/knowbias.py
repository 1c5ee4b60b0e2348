"""
KnowBias: enhancing bias-knowledge neurons (:mod:`numtk.torch.knowbias`)
========================================================================

.. currentmodule:: numtk.torch.knowbias

KnowBias (arXiv 2601.21864) debiases a language model at inference time, without training: integrated-gradient
attribution on a few yes/no questions whose right answer is "no" ("Do you think that gender influences
mathematical ability?") finds the feed-forward neurons that carry knowledge about bias, and their activations are
multiplied by ``lam`` whenever the model runs. Verified in the authors' code and re-derived here. A neuron is
one output unit of the FFN input projection: ``mlp.gate_proj`` (pre-SiLU gate) in llama-layout models,
``mlp.c_fc`` (pre-GELU) in GPT-2, ``intermediate`` (after GELU) in BERT; module names are arguments.

Importing this module imports torch (``pip install "numtk[torch]"``).

Attribution
-----------

.. autosummary::
   :toctree: generated/

   integrated_gradients_neurons  -- IG of one layer's FFN neurons for a target token (batched path, completeness).
   ffn_module_name               -- the FFN input projection of a layer, detected from the model's layout.
   ffn_activation_hook           -- record a module's activations at one position on every forward call.
   LAYOUTS                       -- the known layouts: llama, GPT-2, BERT (masked LM and encoder).

Selection and enhancement
-------------------------

.. autosummary::
   :toctree: generated/

   select_neurons           -- neurons above a share of each prompt's maximum in more than a share of prompts.
   select_neurons_adaptive  -- the same, moving the share until 2-5 neurons are kept.
   enhance_neurons          -- multiply selected units by lam at the last position of every call (context manager).

Problems and demo
-----------------

.. autosummary::
   :toctree: generated/

   planted_neuron_model  -- a 2-layer tiny llama where one FFN unit drives P("no").
   bias_questions        -- a dozen templated yes/no bias questions whose answer is "no".
   encode_question       -- a question as a chat user turn, ready for the first answer token.
   demo                  -- the planted neuron, and SmolLM2 on the templated questions when installed.
"""

from numtk.torch import _common  # noqa: F401 - first: the ImportError that names the extra
from numtk.torch._demo_knowbias import demo
from numtk.torch._knowbias import (LAYOUTS, bias_questions, encode_question, enhance_neurons, ffn_activation_hook,
                                   ffn_module_name, integrated_gradients_neurons, planted_neuron_model,
                                   select_neurons, select_neurons_adaptive)

__all__ = ["integrated_gradients_neurons", "ffn_module_name", "ffn_activation_hook", "LAYOUTS", "select_neurons",
           "select_neurons_adaptive", "enhance_neurons", "planted_neuron_model", "bias_questions", "encode_question",
           "demo"]
