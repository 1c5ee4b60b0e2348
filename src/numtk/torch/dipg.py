"""
Discrete graph prompts with the perturbed top-k and I-MLE (:mod:`numtk.torch.dipg`)
===================================================================================

.. currentmodule:: numtk.torch.dipg

DiP-G ("Discrete Prompting for Graphs", ICML 2026) adapts a frozen pre-trained GNN by adding, around each
target node, k edges chosen among the candidate edges ``target <-> node`` of its multi-hop subgraph. The
choice is a hard k-sparse mask in training as in test: scores over the candidates, a perturbed top-k in the
forward and the I-MLE gradient estimator (Niepert, Minervini and Franceschi, NeurIPS 2021) in the backward.
This removes the mismatch of continuous prompts (soft edge weights in training, discretised in test). An
active-set screening by bounds shrinks the set of items a top-k solve has to order and stays exact; measured in
torch on a CPU, :func:`screened_topk` with its validation is not faster than :func:`topk_mask` or ``torch.topk``
(a selection of a small k is already one compiled pass), only than a full sort (see ``bench/compare.py
--dipg``).

I-MLE follows the published method and its reference code; the screening rule is **reconstructed** (the
paper's rule is not public; :func:`screened_topk` says what it does and why it is exact).

Importing this module imports torch (``pip install "numtk[torch]"``).

Top-k and I-MLE
---------------

.. autosummary::
   :toctree: generated/

   topk_mask           -- the exact top-k: a k-hot mask along the last dimension, ties to the lower position.
   sum_of_gamma_noise  -- the sum-of-Gamma noise of the perturbed top-k.
   imle_topk           -- perturbed top-k forward, I-MLE backward reusing the forward's noise.
   screened_topk       -- top-k with an active-set screening by bounds (reconstructed; exact).

Graphs
------

.. autosummary::
   :toctree: generated/

   candidate_edges      -- a target's multi-hop subgraph and its candidate prompt edges.
   GCN                  -- a two-layer GCN in plain torch (symmetric normalisation, self loops, edge weights).
   DiscreteGraphPrompt  -- DiP-G: a frozen GNN, hard k-sparse prompt edges per target, a linear head.
   demo                 -- a planted-partition graph: DiP-G against a continuous prompt discretised at test.
"""

from numtk.torch import _common  # noqa: F401 - first: the ImportError that names the extra
from numtk.torch._demo_dipg import demo
from numtk.torch._dipg import (GCN, DiscreteGraphPrompt, candidate_edges, imle_topk, screened_topk,
                               sum_of_gamma_noise, topk_mask)

__all__ = ["topk_mask", "sum_of_gamma_noise", "imle_topk", "screened_topk", "candidate_edges", "GCN",
           "DiscreteGraphPrompt", "demo"]
