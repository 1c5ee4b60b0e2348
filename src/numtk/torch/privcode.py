"""
PrivCode++: differentially private fine-tuning of code models (:mod:`numtk.torch.privcode`)
===========================================================================================

.. currentmodule:: numtk.torch.privcode

PrivCode++ (arXiv 2606.09145, ICML 2026) fine-tunes a code language model with differential privacy when both
prompts and code are sensitive. Stage 1 trains with DP-SGD, adding to the cross-entropy a KL term towards a frozen
pretrained model on the tokens of structural AST nodes (loops, branches, definitions), weighted by a decaying
schedule; the DP model then only synthesises data, and stage 2 fine-tunes on that data without privacy cost
(post-processing). Latent conditions (PrivLC) replace the private prompts at synthesis.

This module has the DP machinery with its accounting, PrivCode's stage-1 pieces and an empirical audit:
per-sample gradients by :mod:`torch.func` (any model, any subset of its parameters), the DP-SGD step with flat
per-example clipping, the Renyi-DP accountant of the Poisson-subsampled Gaussian mechanism (integer and fractional
orders, the improved conversion; equal to Opacus's) and its inverse, the syntax-aware KL (whose gradient the
authors' code loses), structural-token masks from Python's :mod:`ast`, latent prefixes, and canary exposure.

The DP-SGD step, the accountant, the KL and its schedule follow the authors' predecessor code (PrivCode) and the
cited papers; the latent prefixes (PrivLC) are **reconstructed** from the abstract. What each epsilon covers is
stated in :func:`rdp_epsilon` and on the tutorial page on privacy accounting.

Importing this module imports torch (``pip install "numtk[torch]"``).

Differential privacy
--------------------

.. autosummary::
   :toctree: generated/

   per_sample_grads      -- per-example gradients of the parameters that require grad (torch.func vmap of grad).
   dp_sgd_step           -- one DP-SGD step: flat per-example clipping, Gaussian noise, a constant divisor.
   poisson_sample        -- the indices of a Poisson-sampled batch (each record with probability q).
   sampled_gaussian_rdp  -- Renyi DP of one step of the subsampled Gaussian mechanism, integer and fractional orders.
   rdp_epsilon           -- epsilon of a DP-SGD run by RDP composition and the improved conversion.
   noise_multiplier_for  -- the smallest noise multiplier reaching a target epsilon (bisection).

PrivCode's stage 1
------------------

.. autosummary::
   :toctree: generated/

   lambda_schedule        -- the staircase-exponential weight of the KL term.
   structural_token_mask  -- tokens in the spans of For/If/While/FunctionDef/ClassDef nodes (from ast).
   syntax_aware_kl        -- KL between the DP model and a frozen reference on masked tokens, gradient kept.
   LatentPrefix           -- K learned soft prefixes prepended to input embeddings (PrivLC, reconstructed).

Audit and demonstration
-----------------------

.. autosummary::
   :toctree: generated/

   canary_exposure  -- exposure of an inserted secret by exact enumeration (Carlini et al. 2019).
   demo             -- a character LM on code-like lines with canaries, trained with and without DP-SGD.

Constants
---------

.. autosummary::

   STRUCTURAL_NODES -- the ast node types whose spans are structural: For, If, While, FunctionDef, ClassDef.
   OPACUS_ORDERS    -- Opacus's default Renyi orders (1.1 .. 10.9 by 0.1, then 12 .. 63): ``orders="opacus"``.
"""

from numtk.torch import _common  # noqa: F401 - first: the ImportError that names the extra
from numtk.torch._demo_privcode import demo
from numtk.torch._privcode import (OPACUS_ORDERS, STRUCTURAL_NODES, LatentPrefix, canary_exposure, dp_sgd_step,
                                   lambda_schedule, noise_multiplier_for, per_sample_grads, poisson_sample,
                                   rdp_epsilon, sampled_gaussian_rdp, structural_token_mask, syntax_aware_kl)

__all__ = ["per_sample_grads", "dp_sgd_step", "poisson_sample", "sampled_gaussian_rdp", "rdp_epsilon",
           "noise_multiplier_for", "lambda_schedule", "structural_token_mask", "syntax_aware_kl", "LatentPrefix",
           "canary_exposure", "STRUCTURAL_NODES", "OPACUS_ORDERS", "demo"]
