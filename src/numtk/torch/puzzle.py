"""
A packed PuzzleMoE layer as a PyTorch module (:mod:`numtk.torch.puzzle`)
=========================================================================

.. currentmodule:: numtk.torch.puzzle

The experts of one MoE layer, merged in pairs element by element and packed into bf16 words by
:func:`numtk.moe.merge_experts` (PuzzleMoE; Zhao, Wang and Zhang, ICML 2026), run as an ``nn.Module``: half
the memory of the experts in bf16, each expert's product computed from the words by the compiled
:func:`numtk.moe.packed_matvec` on the CPU (the module's buffers are read in place, never copied), by a torch
decode elsewhere. The module stands in for the list of experts of an MoE layer (``layer[e](x)``), for
one-matrix experts and for gated (SwiGLU) FFN experts; it is differentiable in its input, and the packed
weights are frozen.

Importing this module imports torch (``pip install "numtk[torch]"``).

Module
------

.. autosummary::
   :toctree: generated/

   PackedExperts  -- the packed experts of one layer: forward by expert index or by pair and position.
"""

from numtk.torch import _common  # noqa: F401 - first: the ImportError that names the extra
from numtk.torch._puzzle import PackedExperts

__all__ = ["PackedExperts"]
