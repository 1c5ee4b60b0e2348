"""
DyCo-CL: contrastive pre-training for few-shot modulation recognition (:mod:`numtk.torch.dyco`)
================================================================================================

.. currentmodule:: numtk.torch.dyco

DyCo-CL ("Geometry-Aware Contrastive Learning for Few-Shot Automatic Modulation Recognition", arXiv
2605.26600) pre-trains an encoder of I/Q windows without labels: the second view of each window is a
*virtual adversarial* perturbation of an augmented copy (the direction that most changes the embedding, by
power iteration), tied to the clean view by a consistency loss; the encoder is a 1-D Swin-style transformer
with shifted attention windows, and a gated fusion injects physical features (higher-order cumulants). The
encoder is then evaluated frozen, 1-shot, by cosine to class prototypes.

No code is public: everything below the abstract is **reconstructed** from the abstract and the prior work it
names (Miyato et al.'s virtual adversarial training, Swin, Swami and Sadler's cumulants); the open choices are
parameters, listed in each docstring. The training windows come from :func:`numtk.datasets.rml2016_like`.

Importing this module imports torch (``pip install "numtk[torch]"``).

Objective
---------

.. autosummary::
   :toctree: generated/

   virtual_adversarial_perturbation -- the input direction that most changes the embedding (power iteration).
   consistency_loss                 -- 1 - cosine (or KL, squared distance) of the clean and the perturbed embedding.
   DyCoCL                           -- the DyCo-CL loss: NT-Xent with an adversarial view, plus consistency.

Encoder
-------

.. autosummary::
   :toctree: generated/

   WindowAttention1D -- multi-head attention inside (cyclically shifted, masked) windows, relative-position bias.
   SignalSwin1D      -- a small 1-D Swin transformer of (B, 2, L) I/Q windows.
   cumulants         -- second-, fourth- and sixth-order cumulants of complex windows.
   expert_features   -- 14 physical features: cumulants, amplitude/phase/frequency statistics, spectral lines.
   HybridFusion      -- gated fusion of an embedding with expert features.

Evaluation
----------

.. autosummary::
   :toctree: generated/

   prototype_accuracy -- few-shot accuracy of the nearest class mean by cosine similarity.
   demo               -- DyCo-CL against SimCLR and a random encoder, 1-shot accuracy against SNR.

Constants
---------

.. autosummary::

   EXPERT_FEATURES    -- the names of the 14 columns of :func:`expert_features`, in order.
"""

from numtk.torch import _common  # noqa: F401 - first: the ImportError that names the extra
from numtk.torch._demo_dyco import demo
from numtk.torch._dyco import (EXPERT_FEATURES, DyCoCL, HybridFusion, SignalSwin1D, WindowAttention1D,
                               consistency_loss, cumulants, expert_features, prototype_accuracy,
                               virtual_adversarial_perturbation)

__all__ = ["virtual_adversarial_perturbation", "consistency_loss", "DyCoCL", "WindowAttention1D", "SignalSwin1D",
           "cumulants", "expert_features", "EXPERT_FEATURES", "HybridFusion", "prototype_accuracy", "demo"]
