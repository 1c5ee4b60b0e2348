"""
Private, IP-protected split adaptation (:mod:`numtk.torch.pisa`)
================================================================

.. currentmodule:: numtk.torch.pisa

PISA ("Privacy-preserving and IP-protected Split Adaptation", ICML 2026) fine-tunes a language model split
between a client that holds private text and a server that holds a proprietary model: the client runs the
frozen bottom blocks and a small local model, the server the top blocks. The representation sent at the split
is clipped per token and noised with a Gaussian; three pieces recover utility: noise-robust pre-training of
the server blocks (MRP), a gated fusion with a local clean stream (DSC), and rectification of the local
model's gradients (UGR).

**Reconstructed.** Neither the paper's text nor its code is public: this module is reconstructed from the
abstract alone. The mechanism at the split (per-token clipping and Gaussian noise) and its accounting are
standard and exact; where the split sits, the MRP objective, the fusion gate and the rectification rule are
the reconstruction's choices, each exposed as a parameter. The metric-privacy noise
(``mechanism="dx"``, Laplace-style, pure epsilon linear in the number of tokens) is offered as an option with a
weaker guarantee. No number of the paper is reproduced.

**Threat model.** The server is honest-but-curious and sees only the noisy split representation
:math:`\\tilde h` (:func:`clip_and_noise`); :func:`split_epsilon` gives its (epsilon, delta)-DP guarantee
per input sequence (record = one sequence of :math:`T` token positions, replace-one adjacency, L2
sensitivity :math:`2C\\sqrt T`, releases composed). Not protected by this mechanism: labels, losses or
gradients that the client returns to the server (to fine-tune the server's blocks, for instance), an
attention mask sent along (it reveals lengths), and a client bottom trained on the private data (then a
sequence's representation depends on other records). The protection of the server's weights (IP) is by
not shipping them, not a formal guarantee.

Importing this module imports torch (``pip install "numtk[torch]"``).

The mechanism and its accounting
--------------------------------

.. autosummary::
   :toctree: generated/

   clip_and_noise    -- per-token clipping to norm C and Gaussian noise of std sigma*C (the split's mechanism).
   gaussian_sigma    -- the analytic Gaussian calibration: the smallest std for (epsilon, delta)-DP.
   gaussian_delta    -- the exact delta of the Gaussian mechanism at epsilon.
   gaussian_epsilon  -- the exact epsilon of the Gaussian mechanism at delta.
   split_epsilon     -- the sequence-level (epsilon, delta) of the split over tokens and releases.

The split model and the utility pieces (reconstructed)
------------------------------------------------------

.. autosummary::
   :toctree: generated/

   SplitModel         -- client, server and head with the mechanism at the split (training and inference).
   split_bert         -- a transformers BERT encoder split after a block into client and server modules.
   BertClient         -- the client module of split_bert: embeddings and the first blocks.
   BertServer         -- the server module of split_bert: the remaining blocks.
   mrp_loss           -- noise-robust pre-training loss of the server blocks (MRP).
   DualStreamFusion   -- gated fusion of the server's output with a local clean stream (DSC).
   rectify_gradients  -- PCGrad projection of the task gradient against the compensation gradient (UGR).
   demo               -- accuracy against noise with and without MRP on a templated sentence-pair task.
"""

from numtk.torch import _common  # noqa: F401 - first: the ImportError that names the extra
from numtk.torch._demo_pisa import demo
from numtk.torch._pisa import (BertClient, BertServer, DualStreamFusion, SplitModel, clip_and_noise, gaussian_delta,
                               gaussian_epsilon, gaussian_sigma, mrp_loss, rectify_gradients, split_bert,
                               split_epsilon)

__all__ = ["clip_and_noise", "gaussian_sigma", "gaussian_delta", "gaussian_epsilon", "split_epsilon",
           "SplitModel", "split_bert", "BertClient", "BertServer", "mrp_loss", "DualStreamFusion",
           "rectify_gradients", "demo"]
