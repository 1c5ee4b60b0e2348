"""
Contrastive identifiability and the support-corrected InfoNCE (:mod:`numtk.torch.contrastive`)
==============================================================================================

.. currentmodule:: numtk.torch.contrastive

Contrastive learning with InfoNCE recovers the latent variables of a data-generating process up to an orthogonal
map when positive pairs come from von Mises-Fisher conditionals on the sphere (Zimmermann et al., ICML 2021).
"The Loss Is Not Enough" (arXiv 2606.04280) shows that a support requirement on the positive conditional, a
diversity condition, is necessary: when the conditional is restricted to a subset of axes (a subspace) a
non-orthogonal map attains a lower InfoNCE, and the minimiser need not be an isometry; a support-corrected
InfoNCE makes orthogonal recovery achievable again, without selecting it uniquely. A cap restriction alone
keeps the conditional rotation invariant (the truncated vMF depends only on the cosine of the pair): in numtk's
checks (d = 3, kappa from 1 to 50, caps of 0.1 to 1 rad, linear maps scaling one axis by 0.5 to 2) no
non-orthogonal map had the lower InfoNCE under a cap alone.

This module has the pieces of that setting: the vMF sampler (Wood's algorithm in its stable form) and its
restricted versions, InfoNCE (with the options that make it SimCLR's NT-Xent) and the support-corrected InfoNCE,
a frozen invertible MLP generator, and the identifiability metrics. The experimental setup follows cl-ica; the
generator's weight rule and the InfoNCE normaliser are re-derived from it (their docstrings say how they differ);
the support-corrected loss is **reconstructed** (its docstring says which forms are offered).

Importing this module imports torch (``pip install "numtk[torch]"``).

Samplers
--------

.. autosummary::
   :toctree: generated/

   sample_vmf             -- von Mises-Fisher draws on the sphere (Wood's sampler, stable at large d and kappa).
   sample_restricted_vmf  -- one positive per anchor from a vMF truncated to a cap, optionally moving only some axes.
   invertible_mlp         -- a frozen random invertible leaky-ReLU MLP (a generator re-derived from cl-ica's).

Losses
------

.. autosummary::
   :toctree: generated/

   info_nce                    -- InfoNCE with in-batch negatives; symmetric and 2B-view options (NT-Xent).
   support_corrected_info_nce  -- InfoNCE with off-support negatives dropped or down-weighted (reconstructed).
   support_mask                -- the support mask of the restricted conditionals (cap, axes).

Metrics
-------

.. autosummary::
   :toctree: generated/

   linear_r2      -- R2 of the best affine fit of the latents from the representation.
   orthogonal_r2  -- R2 of the best orthogonal (similarity) fit, scale normalised.
   mcc            -- mean correlation coefficient, components matched by linear assignment.

Demo
----

.. autosummary::
   :toctree: generated/

   demo  -- full-support vs restricted conditionals: linear and orthogonal R2 against the cap angle.
"""

from numtk.torch import _common  # noqa: F401 - first: the ImportError that names the extra
from numtk.torch._contrastive import (info_nce, invertible_mlp, linear_r2, mcc, orthogonal_r2, sample_restricted_vmf,
                                      sample_vmf, support_corrected_info_nce, support_mask)
from numtk.torch._demo_contrastive import demo

__all__ = ["sample_vmf", "sample_restricted_vmf", "invertible_mlp", "info_nce", "support_corrected_info_nce",
           "support_mask", "linear_r2", "orthogonal_r2", "mcc", "demo"]
