"""
Spectral representation alignment for diffusion training (:mod:`numtk.torch.spectral`)
======================================================================================

.. currentmodule:: numtk.torch.spectral

Diffusion models learn faster when their hidden states are aligned with good representations. REPA (Yu et al.,
ICLR 2025) aligns a diffusion transformer's hidden state with a frozen encoder's features through a small
projector and a negative-cosine loss. The spectral alignment paper (ICML 2026) reads the Gaussian kernel that
noises a clean sample as the random augmentation of spectral contrastive learning (HaoChen et al., 2021) and
adds the spectral contrastive loss between hidden states of one sample noised twice as a self-supervised
regulariser. This module has both losses, the spectral loss's exact population form on a finite augmentation
graph, REPA's projector and interpolant, and the regulariser as a term of the denoising loss.

The spectral loss and REPA's loss follow the authors' code; the pairing of the spectral regulariser is
**reconstructed** (its docstring lists the open choices, each a parameter).

Importing this module imports torch (``pip install "numtk[torch]"``).

Losses
------

.. autosummary::
   :toctree: generated/

   spectral_contrastive_loss  -- the spectral contrastive loss of a batch of positive pairs (norm clipping at sqrt(mu)).
   spectral_population_loss   -- its exact population form on a finite augmentation graph (matrix or expectations).
   repa_loss                  -- REPA's projection loss: negative cosine per token, averaged.
   spectral_alignment_loss    -- the spectral regulariser of hidden states of one sample noised twice (reconstructed).
   diffusion_loss             -- the v-prediction denoising loss plus a REPA, spectral or spectral-REPA term.

Pieces
------

.. autosummary::
   :toctree: generated/

   build_projector     -- REPA's projector: Linear-SiLU-Linear-SiLU-Linear.
   linear_interpolant  -- x_t = (1 - t) x0 + t eps and the velocity target eps - x0 (t = 1 is noise).
   demo                -- a 2-D Gaussian-mixture diffusion model trained with and without the regulariser.
"""

from numtk.torch import _common  # noqa: F401 - first: the ImportError that names the extra
from numtk.torch._demo_spectral import demo
from numtk.torch._spectral import (build_projector, diffusion_loss, linear_interpolant, repa_loss,
                                   spectral_alignment_loss, spectral_contrastive_loss, spectral_population_loss)

__all__ = ["spectral_contrastive_loss", "spectral_population_loss", "repa_loss", "build_projector",
           "linear_interpolant", "spectral_alignment_loss", "diffusion_loss", "demo"]
