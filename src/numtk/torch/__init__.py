"""
The PyTorch bridge (:mod:`numtk.torch`)
=======================================

.. currentmodule:: numtk.torch

The deep-learning methods as reusable PyTorch pieces: functions, modules and training helpers. They need
PyTorch (``pip install "numtk[torch]"``). ``import numtk.torch`` itself does not import torch: each
module below is imported on first access (``numtk.torch.llep``) and imports torch then; without torch
that access raises an ImportError that says how to install it.

Conventions shared by the modules: functions follow the device and dtype of their input tensors, ``rng``
accepts None, an int, a :class:`numpy.random.Generator` or a :class:`torch.Generator`, and bad input gets a
ValueError or TypeError that names the argument.

Modules
-------

.. autosummary::
   :toctree: generated/

   llep       -- least-loaded expert parallelism: an MoE layer run by a plan under torch.distributed.
   puzzle     -- a PuzzleMoE layer packed in bf16 words as an nn.Module (compiled CPU forward).
   tokendrop  -- TokenDrop: token-level backpropagation skipping for fine-tuning llama-layout models.
   moddit     -- MOD-DiT: predicted block-sparse attention from fitted line features of block maps.
   mswt       -- multi-scale wavelet transformers: differentiable DWT/IDWT, wavelet down/up and attention.
   spectral   -- spectral representation alignment for diffusion training (and REPA's projection loss).
   contrastive -- contrastive identifiability: vMF conditionals, InfoNCE and its support correction, R2 and MCC.
   dipg       -- DiP-G: discrete graph prompts learned through a perturbed top-k and the I-MLE estimator.
   dyco       -- DyCo-CL: virtual adversarial views, a 1-D shifted-window signal transformer, cumulant features.
   models     -- tiny real models from PyPI wheels (SmolLM2-135M, all-MiniLM-L6-v2) as transformers models, offline.
   knowbias   -- KnowBias: FFN neuron hooks, integrated-gradient attribution, selection and enhancement.
   ffr        -- FFR: robust-improvement rewards, group-normalised advantages and the GRPO token loss.
   privcode   -- PrivCode++: per-sample gradients, DP-SGD, the RDP accountant, the syntax-aware KL.
   pisa       -- PISA (reconstructed): noise at the split, analytic Gaussian calibration, MRP, fusion.
   hirsch     -- the algebraic Hirsch problem as a gymnasium environment, an equivariant GNN, the options agent.
   psro_oracle -- deep-RL best-response oracles (PPO) for numtk.games.psro and Global PSRO.
"""

from __future__ import annotations

import importlib
from typing import Any

# The bridge's public modules; each is imported (with torch) on first access.
submodules = ["llep", "puzzle", "tokendrop", "moddit", "mswt", "spectral", "contrastive", "dipg", "dyco", "models",
              "knowbias", "ffr", "privcode", "pisa", "hirsch", "psro_oracle"]

__all__ = list(submodules)


def __getattr__(name: str) -> Any:
    if name in submodules:
        return importlib.import_module(f"numtk.torch.{name}")
    raise AttributeError(f"module 'numtk.torch' has no attribute {name!r}")


def __dir__() -> list[str]:
    return list(__all__)
