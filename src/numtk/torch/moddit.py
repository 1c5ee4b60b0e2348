"""
MOD-DiT: predicted block-sparse attention (:mod:`numtk.torch.moddit`)
=====================================================================

.. currentmodule:: numtk.torch.moddit

MOD-DiT (arXiv 2601.11641; code pkumelon/MOD-DiT, MIT) speeds up the attention of video diffusion transformers
without sampling the attention map at every step. During a few full-attention warm-up steps it measures which
(block x block) tiles of each head's attention carry negligible probability, fits that block map with a linear
"mixture of distributions" of lines (diagonals, columns and the frame-block diagonal), extrapolates the line
values to predict the mask of the next interval of steps, and refreshes the mask online at one full-attention
step per interval, keeping the old measurement of every block it did not compute. The method is verified in the
authors' code (``MoD/mod/attn_mask.py``, ``MoD/mod/cuda_lstsq.py``); the block-sparse attention here is a
portable torch implementation (the anchor calls CUDA kernels) that computes only the kept blocks.

Importing this module imports torch (``pip install "numtk[torch]"``).

Block maps and the line model
-----------------------------

.. autosummary::
   :toctree: generated/

   block_sparsity_map      -- per head, the fraction of attention probabilities below a threshold in each block.
   lines_design_gram       -- the closed-form Gram matrix of the line design and its one-time ridge factor.
   lines_rhs               -- the right-hand sides M^T S: sums of a block map over every line and the frame blocks.
   fit_line_features       -- ridge fit of block maps by lines, every head one right-hand side.
   lines_map               -- the block map of line coefficients (fitted or predicted maps).

Prediction and masks
--------------------

.. autosummary::
   :toctree: generated/

   extrapolate_and_select  -- extrapolate the last two fits and select the top-k most important lines.
   mask_from_lines         -- the block mask of selected lines (plus the frame-block diagonal by head).
   OnlineMaskState         -- the warm-up / interval schedule and online mask updates of one layer (text in full).

Attention
---------

.. autosummary::
   :toctree: generated/

   block_sparse_attention  -- attention over the kept blocks only (gathered), exact dense SDPA for a full mask.
   masked_dense_attention  -- the reference: dense attention with the block mask applied (computes every block).

Demonstration
-------------

.. autosummary::
   :toctree: generated/

   demo  -- planted structured attention over denoising steps: MOD-DiT masks against random and static masks.
"""

from numtk.torch import _common  # noqa: F401 - first: the ImportError that names the extra
from numtk.torch._demo_moddit import demo
from numtk.torch._moddit import (OnlineMaskState, block_sparse_attention, block_sparsity_map,
                                 extrapolate_and_select, fit_line_features, lines_design_gram, lines_map,
                                 lines_rhs, mask_from_lines, masked_dense_attention)

__all__ = ["block_sparsity_map", "lines_design_gram", "lines_rhs", "fit_line_features", "lines_map",
           "extrapolate_and_select", "mask_from_lines", "OnlineMaskState", "block_sparse_attention",
           "masked_dense_attention", "demo"]
